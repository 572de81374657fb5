// What the benchmarks measure with and how they report it: CPU time and memory of a process (/proc), the
// whole of PostgreSQL's CPU, latency percentiles, calls from several clients at once, and a markdown table.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const TICK_MS = 1000 / Number(execFileSync('getconf', ['CLK_TCK']).toString().trim() || 100);

/** CPU time (user + system, every thread) of a process, in ms; with its waited-for children's too. */
export function cpuMs(pid, withChildren = false) {
  return statCpuMs(`/proc/${pid}/stat`, withChildren);
}

/** CPU time (user + system) of one thread `tid` of process `pid`, in ms. */
export function threadCpuMs(pid, tid) {
  return statCpuMs(`/proc/${pid}/task/${tid}/stat`, false);
}

function statCpuMs(path, withChildren) {
  try {
    const stat = readFileSync(path, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const children = withChildren ? Number(fields[13]) + Number(fields[14]) : 0;
    return (Number(fields[11]) + Number(fields[12]) + children) * TICK_MS;
  } catch {
    return 0;
  }
}

/**
 * CPU of the postmaster, of the backends that ended (its children's) and of every live backend: all of
 * PostgreSQL's, so other clients of the same server count too.
 */
export function postgresCpuMs(pid) {
  if (!pid) return 0;
  let total = cpuMs(pid, true);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[1] === pid) total += (Number(fields[11]) + Number(fields[12])) * TICK_MS;
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** A process's resident memory now and at its peak, in MB (/proc/<pid>/status: VmRSS, VmHWM). */
export function rssMb(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const mb = (field) => Math.round(Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)[1]) / 1024);
  return { rss: mb('VmRSS'), peak: mb('VmHWM') };
}

export const round = (n, digits = 2) => Number(n.toFixed(digits));

export function percentiles(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
  return { p50: round(at(0.5)), p99: round(at(0.99)), max: round(sorted[sorted.length - 1]) };
}

/** `n` calls of `task(i)` from `clients` loops at once; answers each call's duration in ms. */
export async function concurrently(n, clients, task) {
  const durations = new Array(n);
  let next = 0;
  const loop = async () => {
    for (let i = next++; i < n; i = next++) {
      const started = performance.now();
      await task(i);
      durations[i] = performance.now() - started;
    }
  };
  await Promise.all(Array.from({ length: Math.min(clients, n) }, loop));
  return durations;
}

export function markdown(header, rows) {
  return [
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}
