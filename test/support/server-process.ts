// A real `serve` process (from source, through tsx, or another command such as an installed
// `ambient-fhir`), for tests that must kill or restart the server.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface ServerProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** Resolves with the exit code (or signal) once the process has ended. */
  readonly exited: Promise<number | NodeJS.Signals | null>;
  /** Everything the process printed, for assertions on logs. */
  output(): string;
}

export interface ServerCommand {
  /** The program and its arguments before `serve`; default: this checkout's source through tsx. */
  readonly command?: readonly [string, ...string[]];
  /** The working directory; default: the checkout. */
  readonly cwd?: string;
}

export async function startServerProcess(
  env: Record<string, string>,
  args: string[] = [],
  { command = [process.execPath, '--import', 'tsx', 'src/main.ts'], cwd = REPO_ROOT }: ServerCommand = {},
): Promise<ServerProcess> {
  const child = spawn(command[0], [...command.slice(1), 'serve', ...args], {
    cwd,
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) =>
    child.on('exit', (code, signal) => resolve(signal ?? code)),
  );
  const url = await new Promise<string>((resolve, reject) => {
    // A server that never says it listens is ended here: the caller gets no handle to end it with.
    const timer = setTimeout(() => {
      clearInterval(poll);
      child.kill('SIGKILL');
      reject(new Error(`server did not start:\n${output}`));
    }, 30_000);
    const poll = setInterval(() => {
      const match = /"address":"(http[^"]+)"[^\n]*ambient-fhir listening/.exec(output);
      if (match) {
        clearInterval(poll);
        clearTimeout(timer);
        resolve(match[1]);
      }
    }, 50);
    void exited.then(() => {
      clearInterval(poll);
      clearTimeout(timer);
      reject(new Error(`server exited before listening:\n${output}`));
    });
  });
  return { url, child, exited, output: () => output };
}
