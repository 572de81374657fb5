// Requests Node's HTTP parser refuses before Fastify sees them (headers or URL too large, a request that
// took too long to arrive, bytes that are no HTTP): answered with an OperationOutcome like every other
// error, instead of Fastify's own JSON, then the connection is closed (it may be out of step).
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';

export function clientErrorResponse(code: string | undefined): string {
  const [status, message] =
    code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'The request did not arrive within the time allowed (AMBIENT_REQUEST_TIMEOUT_MS)']
      : code === 'HPE_HEADER_OVERFLOW'
        ? [
            431,
            'The request line and headers are larger than the server accepts (16 KiB): send long searches as POST _search',
          ]
        : [400, 'The request is not well-formed HTTP'];
  const body = JSON.stringify({
    resourceType: 'OperationOutcome',
    issue: [
      {
        severity: 'error',
        code: status === 408 ? 'timeout' : status === 431 ? 'too-long' : 'structure',
        diagnostics: message,
      },
    ],
  });
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `Content-Type: application/fhir+json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`
  );
}

export function clientErrorHandler(error: Error & { code?: string }, socket: Socket): void {
  // A reset connection has nobody to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  if (socket.writable) socket.write(clientErrorResponse(error.code));
  socket.destroy(error);
}
