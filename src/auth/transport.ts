// Where a request comes from and whether it travelled encrypted. With AMBIENT_TRUST_PROXY set, Fastify's
// request.ip and request.protocol follow X-Forwarded-For / X-Forwarded-Proto; without it they are the
// socket's own, so a client cannot claim to be on loopback or on HTTPS.
import { isIP } from 'node:net';
import type { FastifyRequest } from 'fastify';

export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const plain = address.startsWith('::ffff:') ? address.slice(7) : address;
  if (isIP(plain) === 4) return plain.startsWith('127.');
  return plain === '::1';
}

/** The client's address: the socket's, or the forwarded client's when the proxy is trusted. */
export function clientAddress(request: FastifyRequest): string {
  return request.ip ?? 'unknown';
}

/** Did the request reach us (or the trusted proxy in front of us) over HTTPS? */
export function isHttps(request: FastifyRequest): boolean {
  return request.protocol === 'https';
}
