// ort.js: ONNX Runtime (npm onnxruntime-node, a test oracle only) on .npy inputs.
//   node tests/oracle/ort.js MODEL --input NAME=X.npy ... --out-dir DIR [--outputs a,b] [--threads N] [--repeat N]
//        [--opt disable|basic|extended|layout|all] [--save-optimized OUT.onnx] [--config KEY=VALUE ...]
// Writes every graph output (or only the listed ones; intermediate tensors must first be
// added as graph outputs, tests/oracle/add_outputs.py) as DIR/<name>.npy, names sanitised
// like ptq's ([A-Za-z0-9._-], others '_').
// --opt: ONNX Runtime's graph optimization level (sessionOptions.graphOptimizationLevel;
// default all, ORT's own default). 'disable' runs the graph node by node as written (for a
// QDQ model: QuantizeLinear, DequantizeLinear and float kernels); 'basic' adds constant
// folding and exact rewrites (on ptq's QDQ models: one DequantizeLinear per consumer, Q/DQ
// copied across data movement, MatMul+Add -> Gemm); 'extended' and 'all' also replace
// node groups with integer or fused kernels (QLinearConv, QLinearGlobalAveragePool,
// MatMulIntegerToFloat, FusedConv, ...; see tests/e2e/quantize_models.sh).
// --save-optimized: ORT writes the graph it runs after optimization (what it fused).
// --config KEY=VALUE: a session configuration entry (onnxruntime_session_options_config_keys.h),
// e.g. session.disable_quant_qdq=1: Q/DQ pairs are not fused into integer kernels at any --opt.
// --repeat N: one warm-up, then N timed runs: prints "ort run: median X ms, min Y ms over N runs".
'use strict';
const path = require('path');
const fs = require('fs');
const root = path.resolve(__dirname, '..', '..');
const ort = require(path.join(root, 'build', 'oracle', 'node_modules', 'onnxruntime-node')); // make deps installs it there

const DT = { '<f4': ['float32', Float32Array], '<f2': ['float16', Uint16Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '|i1': ['int8', Int8Array], '|u1': ['uint8', Uint8Array], '|b1': ['bool', Uint8Array] };

function readNpy(p) {
  const b = fs.readFileSync(p);
  if (b.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(p + ': not a .npy file');
  const v = b[6], hl = v === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8), hs = v === 1 ? 10 : 12;
  const h = b.toString('latin1', hs, hs + hl);
  const descr = h.match(/'descr':\s*'([^']+)'/)[1];
  const shape = h.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  const [type, Arr] = DT[descr];
  const raw = b.subarray(hs + hl);
  const data = new Arr(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
  return new ort.Tensor(type, type === 'bool' ? Uint8Array.from(data) : data, shape);
}

function writeNpy(p, t) {
  const descr = Object.keys(DT).find(k => DT[k][0] === t.type);
  const shape = t.dims.join(', ') + (t.dims.length === 1 ? ',' : '');
  let h = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape}), }`;
  h += ' '.repeat((64 - ((10 + h.length + 1) % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1'); head[6] = 1; head[7] = 0; head.writeUInt16LE(h.length, 8);
  const d = t.data;
  fs.writeFileSync(p, Buffer.concat([head, Buffer.from(h, 'latin1'), Buffer.from(d.buffer, d.byteOffset, d.byteLength)]));
}

const sanitise = n => n.replace(/[^A-Za-z0-9._-]/g, '_');
module.exports = { ort, readNpy, writeNpy }; // for tests/oracle/ort_batch.js

if (require.main === module) (async () => {
  const argv = process.argv.slice(2);
  const model = argv[0];
  const inputs = {}; let outDir = null, threads = 2, repeat = 0, opt = 'all', only = null, saveOpt = null;
  const config = [];
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--input') { const [n, f] = argv[++i].split('='); inputs[n] = readNpy(f); }
    else if (a === '--out-dir') outDir = argv[++i];
    else if (a === '--threads') threads = parseInt(argv[++i], 10);
    else if (a === '--repeat') repeat = parseInt(argv[++i], 10);
    else if (a === '--opt') {
      opt = argv[++i];
      if (!['disabled', 'disable', 'basic', 'extended', 'layout', 'all'].includes(opt)) throw new Error('--opt: disable, basic, extended, layout or all');
      if (opt === 'disable') opt = 'disabled';
    }
    else if (a === '--save-optimized') saveOpt = argv[++i];
    else if (a === '--config') { const kv = argv[++i], eq = kv.indexOf('='); config.push([kv.slice(0, eq), kv.slice(eq + 1)]); }
    else if (a === '--outputs') only = argv[++i].split(',').filter(n => n);
    else throw new Error('unknown argument ' + a);
  }
  const so = { intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: opt };
  if (saveOpt) so.optimizedModelFilePath = saveOpt;
  for (const [k, v] of config) { // "a.b.c" -> extra: {a: {b: {c: v}}}
    let o = so.extra = so.extra || {};
    const parts = k.split('.');
    for (const p of parts.slice(0, -1)) o = o[p] = o[p] || {};
    o[parts[parts.length - 1]] = v;
  }
  const s = await ort.InferenceSession.create(model, so);
  const names = only || s.outputNames;
  let r = await s.run(inputs, names);
  if (repeat > 0) {
    const t = [];
    for (let i = 0; i < repeat; i++) {
      const t0 = process.hrtime.bigint(); r = await s.run(inputs, names); t.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    t.sort((a, b) => a - b);
    const med = repeat % 2 ? t[(repeat - 1) / 2] : (t[repeat / 2 - 1] + t[repeat / 2]) / 2;
    console.log(`ort run: median ${med.toFixed(3)} ms, min ${t[0].toFixed(3)} ms over ${repeat} runs`);
  }
  if (outDir) {
    fs.mkdirSync(outDir, { recursive: true });
    for (const n of names) writeNpy(path.join(outDir, sanitise(n) + '.npy'), r[n]);
  }
})().catch(e => { console.error('ort.js: ' + e.message); process.exit(1); });
