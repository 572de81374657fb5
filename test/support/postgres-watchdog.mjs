// Keeps a test run's embedded PostgreSQL (embedded-postgres.ts) from outliving the run: started detached
// with the run's process id and the server's data folder, it checks every second whether the run is still
// alive. When the run has gone without stopping its server (killed, crashed), it stops the server (SIGINT:
// PostgreSQL's fast shutdown), waits for it to end, and deletes the folder. When the folder is gone (the
// run stopped its server itself), there is nothing left to watch and it exits.
//
// Usage: node postgres-watchdog.mjs <owner pid> <data folder>
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const [ownerPid, dataDir] = [Number(process.argv[2]), process.argv[3]];

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
};

while (existsSync(dataDir) && alive(ownerPid)) await sleep(1000);

if (existsSync(dataDir)) {
  const pidFile = join(dataDir, 'postmaster.pid');
  const serverPid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : 0;
  if (serverPid > 0 && alive(serverPid)) {
    process.kill(serverPid, 'SIGINT');
    for (let i = 0; i < 30 && alive(serverPid); i++) await sleep(500);
  }
  rmSync(dataDir, { recursive: true, force: true });
}
