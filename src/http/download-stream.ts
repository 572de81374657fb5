// A file download that holds little memory whatever the file's size and however slowly its client reads
// (issue 23 item 11): the stored bytes are pulled a chunk at a time only when the response has room for
// them (back-pressure), at most DOWNLOAD_BUFFER_BYTES waiting here; and a client that reads nothing for
// the idle timeout is dropped, so that a thousand paused downloads do not hold a thousand sockets and
// buffers forever.
import { Readable } from 'node:stream';

/** What a download buffers ahead of its socket (the stream's highWaterMark). */
export const DOWNLOAD_BUFFER_BYTES = 64 * 1024;

export class DownloadStream extends Readable {
  private pulling = false;
  /** Since when the stream has been full, waiting for its reader (undefined: the reader wants data). */
  private fullSince: number | undefined;
  private readonly watch: NodeJS.Timeout;

  constructor(
    private readonly source: AsyncGenerator<Buffer>,
    idleMs: number,
    onIdle: () => void,
  ) {
    super({ highWaterMark: DOWNLOAD_BUFFER_BYTES });
    this.watch = setInterval(
      () => {
        if (this.fullSince !== undefined && Date.now() - this.fullSince >= idleMs) {
          clearInterval(this.watch);
          onIdle();
        }
      },
      Math.max(25, Math.min(1000, Math.floor(idleMs / 4))),
    );
    this.watch.unref();
  }

  override _read(): void {
    this.fullSince = undefined;
    if (this.pulling) return;
    this.pulling = true;
    void this.pump();
  }

  /** Pushes chunks until the stream is full (then waits for the next _read) or the file ends. */
  private async pump(): Promise<void> {
    try {
      for (;;) {
        const next = await this.source.next();
        if (this.destroyed) return;
        if (next.done) {
          this.push(null);
          return;
        }
        if (!this.push(next.value)) {
          this.fullSince = Date.now();
          return;
        }
      }
    } catch (error) {
      this.destroy(error as Error);
    } finally {
      this.pulling = false;
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    clearInterval(this.watch);
    this.source.return(undefined).then(
      () => callback(error),
      () => callback(error),
    );
  }
}

/**
 * Whether a client accepts gzip per its Accept-Encoding (RFC 9110 §12.5.3): `gzip` or `x-gzip` with a
 * non-zero q, or else `*` with a non-zero q.
 */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  const values = (Array.isArray(header) ? header.join(',') : (header ?? '')).split(',');
  let wildcard = false;
  for (const value of values) {
    const [name, ...parameters] = value.split(';').map((part) => part.trim().toLowerCase());
    const q = parameters.find((p) => p.startsWith('q='));
    const accepted = q === undefined || Number(q.slice(2)) > 0;
    if (name === 'gzip' || name === 'x-gzip') return accepted;
    if (name === '*') wildcard = accepted;
  }
  return wildcard;
}
