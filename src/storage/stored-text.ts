// Text that the server itself stores from messages it did not write (a job's failure reason).

/** An error message as stored: no control characters (PostgreSQL TEXT refuses NUL), at most 2000 characters. */
export function cleanReason(message: string): string {
  // eslint-disable-next-line no-control-regex
  return message.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '').slice(0, 2000);
}
