// ort_batch.js: ONNX Runtime (npm onnxruntime-node, a test oracle only) on many .npy inputs
// in one process, for pipelines that run one model on hundreds of inputs of varying shape
// (tests/oracle/ocr_pipeline.py: one detector input per image, one recogniser input per crop).
//   node tests/oracle/ort_batch.js MODEL LIST [--threads N] [--opt LEVEL]
// LIST: one "IN.npy OUT.npy" pair a line; the model's first input gets IN.npy, its first
// output is written to OUT.npy. One session for the whole list; .npy reading and writing
// are ort.js's.
'use strict';
const fs = require('fs');
const { ort, readNpy, writeNpy } = require('./ort.js');

(async () => {
  const argv = process.argv.slice(2);
  if (argv.length < 2) throw new Error('usage: ort_batch.js MODEL LIST [--threads N] [--opt LEVEL]');
  let threads = 2, opt = 'all';
  for (let i = 2; i < argv.length; i++) {
    if (argv[i] === '--threads') threads = parseInt(argv[++i], 10);
    else if (argv[i] === '--opt') { opt = argv[++i]; if (opt === 'disable') opt = 'disabled'; }
    else throw new Error('unknown argument ' + argv[i]);
  }
  const s = await ort.InferenceSession.create(argv[0], { intraOpNumThreads: threads, interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: opt });
  const pairs = fs.readFileSync(argv[1], 'utf8').split('\n').filter(l => l.trim()).map(l => l.trim().split(/\s+/));
  for (const [inp, out] of pairs) {
    const r = await s.run({ [s.inputNames[0]]: readNpy(inp) }, [s.outputNames[0]]);
    writeNpy(out, r[s.outputNames[0]]);
  }
})().catch(e => { console.error('ort_batch.js: ' + e.message); process.exit(1); });
