// Run three.js's CCDIKSolver on a chain for many targets (kinema cross-check and benchmark).
// Usage: node threejs_ccd.mjs input.json   (this file is copied next to node_modules/three)
// input: {translations: [[x,y,z]...], rotations: [[x,y,z,w]...] (K bones, each the parent of the next),
//         targets: [[x,y,z]...], iteration: 20, repeats: 0}
// output (stdout JSON): {rotations: [targets][K][4] local quaternions xyzw, us_per_solve: median or null}
import { readFileSync } from 'node:fs';
import { Bone, Vector3 } from 'three';
import { CCDIKSolver } from 'three/addons/animation/CCDIKSolver.js';

const inp = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const K = inp.translations.length;
const bones = [];
for (let k = 0; k < K; k++) {
  const b = new Bone();
  b.name = 'b' + k;
  b.position.fromArray(inp.translations[k]);
  b.quaternion.fromArray(inp.rotations[k]);
  if (k > 0) bones[k - 1].add(b);
  bones.push(b);
}
const target = new Bone();
target.name = 'target';
bones.push(target);
const links = [];
for (let k = K - 2; k >= 0; k--) links.push({ index: k });
const iks = [{ target: K, effector: K - 1, links, iteration: inp.iteration }];
const mesh = { skeleton: { bones } };
const solver = new CCDIKSolver(mesh, iks);

function solveOne(t) {
  for (let k = 0; k < K; k++) bones[k].quaternion.fromArray(inp.rotations[k]);
  bones[0].updateMatrixWorld(true);
  target.position.set(t[0], t[1], t[2]);
  target.updateMatrixWorld(true);
  solver.update();
}

const out = [];
for (const t of inp.targets) {
  solveOne(t);
  out.push(bones.slice(0, K).map((b) => [b.quaternion.x, b.quaternion.y, b.quaternion.z, b.quaternion.w]));
}
let us = null;
if (inp.repeats > 0) {
  const per = [];
  for (let r = 0; r < inp.repeats; r++) {
    const t0 = process.hrtime.bigint();
    for (const t of inp.targets) solveOne(t);
    const t1 = process.hrtime.bigint();
    per.push(Number(t1 - t0) / 1000 / inp.targets.length);
  }
  per.sort((a, b) => a - b);
  us = per[Math.floor(per.length / 2)];
}
process.stdout.write(JSON.stringify({ rotations: out, us_per_solve: us }));
