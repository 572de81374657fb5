// The export phase of the synthetic benchmark: a system-level Bulk Data export of the whole data set over
// HTTP, as a client runs it (kick-off, poll the status URL, download every file), with the server's
// resident memory sampled while it runs (/proc/<pid>/status VmRSS every 100 ms).
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

function rssMb(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024);
}

/** Samples the process's RSS until stopped; answers the highest sample. */
function sampleRss(pid) {
  let peak = rssMb(pid);
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssMb(pid));
    } catch {
      // the process is gone
    }
  }, 100);
  return () => {
    clearInterval(timer);
    return peak;
  };
}

/** Reads a response body as it arrives, counting bytes and lines, holding one network chunk at a time. */
async function drain(response) {
  let bytes = 0;
  let lines = 0;
  for await (const chunk of response.body) {
    bytes += chunk.length;
    for (const byte of chunk) if (byte === 10) lines++;
  }
  return { bytes, lines };
}

export async function syntheticExport(baseUrl, token, pid) {
  const auth = { authorization: `Bearer ${token}` };
  const rssBeforeMb = rssMb(pid);
  const stop = sampleRss(pid);
  const started = performance.now();
  const kick = await fetch(`${baseUrl}/fhir/$export`, {
    headers: { ...auth, prefer: 'respond-async', accept: 'application/fhir+json' },
  });
  if (kick.status !== 202) throw new Error(`export kick-off: ${kick.status} ${await kick.text()}`);
  const statusUrl = kick.headers.get('content-location');
  let manifest;
  for (;;) {
    const status = await fetch(statusUrl, { headers: auth });
    if (status.status === 200) {
      manifest = await status.json();
      break;
    }
    if (status.status !== 202) throw new Error(`export status: ${status.status} ${await status.text()}`);
    await status.arrayBuffer();
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const exportSeconds = (performance.now() - started) / 1000;
  const resources = manifest.output.reduce((sum, o) => sum + o.count, 0);
  const downloadStarted = performance.now();
  let bytes = 0;
  let lines = 0;
  for (const output of manifest.output) {
    const file = await fetch(output.url, { headers: { ...auth, accept: 'application/fhir+ndjson' } });
    if (file.status !== 200) throw new Error(`export file ${output.url}: ${file.status}`);
    const drained = await drain(file);
    if (drained.lines !== output.count)
      throw new Error(`${output.url}: ${drained.lines} lines, manifest says ${output.count}`);
    bytes += drained.bytes;
    lines += drained.lines;
  }
  const downloadSeconds = (performance.now() - downloadStarted) / 1000;
  const peakRssDuringMb = stop();
  return {
    resources,
    lines,
    files: manifest.output.length,
    megabytes: Math.round(bytes / 2 ** 20),
    exportSeconds: Math.round(exportSeconds * 10) / 10,
    perSec: Math.round(resources / exportSeconds),
    downloadSeconds: Math.round(downloadSeconds * 10) / 10,
    downloadMbPerSec: Math.round(bytes / 2 ** 20 / downloadSeconds),
    rssBeforeMb,
    peakRssDuringMb,
  };
}
