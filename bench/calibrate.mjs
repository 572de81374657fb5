// A copy of the team's calibration script (calibrate.mjs), kept verbatim below this header: puts benchmark numbers
// from machines of different speed on one scale (docs/benchmarks.md). Run it beside every benchmark.
// How fast is this machine, right now? A fixed probe to put benchmark numbers from different machines
// (or from the same machine on a busy and a quiet day) on one scale. Usage: node calibrate.mjs [seconds]
// Prints one JSON line: {"http_rps": ..., "fsync_per_s": ..., "seconds": ...}
//   http_rps    a node:http server in a child process parses and re-serialises a 1.5 KB Patient per
//               request; 8 keep-alive clients in this process (the same shape of work as the workload:
//               JSON over loopback HTTP on 2 shared cores)
//   fsync_per_s 4 KB appends each followed by fdatasync, in a temporary file in the current directory
// Run it in the same run as the workload. Scale a figure measured elsewhere by the ratio of http_rps.
import { spawn } from 'node:child_process';
import { openSync, writeSync, fdatasyncSync, closeSync, unlinkSync } from 'node:fs';
import http from 'node:http';
import { performance } from 'node:perf_hooks';

const SECONDS = Number(process.argv[2] ?? 5);
const patient = JSON.stringify({
  resourceType: 'Patient', id: 'calibrate', meta: { versionId: '1', lastUpdated: '2026-01-01T00:00:00Z' },
  name: [{ use: 'official', family: 'Chalmers', given: ['Peter', 'James'] }], gender: 'male', birthDate: '1974-12-25',
  address: [{ use: 'home', line: ['534 Erewhon St'], city: 'PleasantVille', postalCode: '3999' }],
  telecom: [{ system: 'phone', value: '(03) 5555 6473', use: 'work' }],
  text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">' + 'x'.repeat(1000) + '</div>' },
});

const serverSource = `
const http = require('node:http');
const s = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    const r = JSON.parse(body); r.meta.versionId = String(Number(r.meta.versionId) + 1);
    const out = JSON.stringify(r);
    res.writeHead(200, { 'content-type': 'application/fhir+json', 'content-length': Buffer.byteLength(out) });
    res.end(out);
  });
});
s.listen(0, '127.0.0.1', () => process.send(s.address().port));
`;

async function httpRate() {
  const child = spawn(process.execPath, ['-e', serverSource], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const port = await new Promise((resolve) => child.once('message', resolve));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  const post = () => new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/', agent,
      headers: { 'content-type': 'application/fhir+json', 'content-length': Buffer.byteLength(patient) } }, (res) => {
      res.resume(); res.on('end', resolve);
    });
    req.on('error', reject); req.end(patient);
  });
  for (let i = 0; i < 200; i++) await post(); // warm-up
  let done = 0;
  const end = performance.now() + SECONDS * 1000;
  const client = async () => { while (performance.now() < end) { await post(); done++; } };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 8 }, client));
  const rate = done / ((performance.now() - t0) / 1000);
  agent.destroy(); child.kill();
  return Math.round(rate);
}

function fsyncRate() {
  const path = `.calibrate-${process.pid}.tmp`;
  const fd = openSync(path, 'w');
  const block = Buffer.alloc(4096, 1);
  let n = 0;
  const end = performance.now() + Math.min(SECONDS, 3) * 1000;
  const t0 = performance.now();
  try {
    while (performance.now() < end) { writeSync(fd, block); fdatasyncSync(fd); n++; }
  } finally { closeSync(fd); unlinkSync(path); }
  return Math.round(n / ((performance.now() - t0) / 1000));
}

const http_rps = await httpRate();
const fsync_per_s = fsyncRate();
console.log(JSON.stringify({ http_rps, fsync_per_s, seconds: SECONDS }));
