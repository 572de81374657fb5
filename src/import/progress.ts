// How `import` shows its progress: a bar redrawn in place on a terminal; elsewhere (a pipe, a log file, a
// CI job) a plain line every few seconds, since carriage returns make a log unreadable.
import type { ImportProgress } from './importer.js';

export interface ProgressOptions {
  /** A terminal: redraw one bar in place. Otherwise: print a line at most every `everyMs`. */
  readonly tty: boolean;
  readonly write: (text: string) => void;
  /** Milliseconds between two progress lines when not on a terminal; 0 prints one for every update. */
  readonly everyMs: number;
  readonly now?: () => number;
}

export interface ProgressReporter {
  update(progress: ImportProgress): void;
  /** Ends the bar's line on a terminal. */
  finish(): void;
}

export const DEFAULT_PROGRESS_EVERY_MS = 5000;

export function progressReporter(options: ProgressOptions): ProgressReporter {
  const now = options.now ?? (() => performance.now());
  const startedAt = now();
  let lastLineAt = startedAt;
  let drawn = false;
  const rate = (progress: ImportProgress, at: number) => {
    const seconds = (at - startedAt) / 1000;
    return seconds > 0 ? Math.round(progress.resources / seconds) : 0;
  };
  return {
    update(progress) {
      const at = now();
      if (options.tty) {
        const width = 30;
        const done = Math.round((progress.filesDone / Math.max(1, progress.filesTotal)) * width);
        options.write(
          `\r[${'#'.repeat(done)}${'.'.repeat(width - done)}] ${progress.filesDone}/${progress.filesTotal} files, ${progress.resources} resources, ${rate(progress, at)}/s `,
        );
        drawn = true;
        return;
      }
      if (at - lastLineAt < options.everyMs) return;
      lastLineAt = at;
      const seconds = ((at - startedAt) / 1000).toFixed(1);
      options.write(
        `import: ${progress.filesDone}/${progress.filesTotal} files, ${progress.resources} resources, ${rate(progress, at)} resources/s, ${seconds} s\n`,
      );
    },
    finish() {
      if (drawn) options.write('\n');
    },
  };
}
