// One rest-hook notification (https://hl7.org/fhir/R4/subscription.html#2.46.7.1): without a payload an
// empty POST to the endpoint; with `application/fhir+json` the resource PUT to the endpoint taken as a
// FHIR base (`{endpoint}/{type}/{id}`), with the Subscription's header lines. Redirects are not
// followed (the endpoint allowed is the one named), the answer's body is not read, and the whole
// exchange is bounded by the time-out.
import { headerPairs, SUBSCRIPTION_PAYLOAD } from '../fhir/subscription-input.js';

export interface RestHookNotification {
  readonly endpoint: string;
  readonly payload: string | null;
  readonly headers: readonly string[];
  readonly type: string;
  readonly id: string;
  /** The version's JSON text when the payload carries it. */
  readonly content?: string;
}

/** Why a delivery failed, for the Subscription's error text (never the endpoint's answer body). */
export type DeliveryOutcome = { ok: true } | { ok: false; reason: string };

/** The process is stopping (`stop`): the notification was not delivered, and was not refused either. */
export class DeliveryStoppedError extends Error {}

export async function sendRestHook(
  notification: RestHookNotification,
  timeoutMs: number,
  stop: AbortSignal,
): Promise<DeliveryOutcome> {
  const headers = new Headers();
  for (const [name, value] of headerPairs(notification.headers)) headers.append(name, value);
  const withPayload = notification.payload === SUBSCRIPTION_PAYLOAD && notification.content !== undefined;
  const base = notification.endpoint.replace(/\/+$/, '');
  const url = withPayload
    ? `${base}/${notification.type}/${encodeURIComponent(notification.id)}`
    : notification.endpoint;
  if (withPayload) headers.set('content-type', `${SUBSCRIPTION_PAYLOAD}; charset=utf-8`);
  try {
    const response = await fetch(url, {
      method: withPayload ? 'PUT' : 'POST',
      headers,
      body: withPayload ? notification.content : '',
      redirect: 'manual',
      signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), stop]),
    });
    await response.body?.cancel().catch(() => undefined);
    if (response.status >= 200 && response.status < 300) return { ok: true };
    return { ok: false, reason: `the endpoint answered HTTP ${response.status}` };
  } catch (error) {
    if (stop.aborted) throw new DeliveryStoppedError();
    const name = (error as Error).name;
    if (name === 'TimeoutError' || name === 'AbortError') {
      return {
        ok: false,
        reason: `the endpoint did not answer within ${timeoutMs} ms (AMBIENT_SUBSCRIPTION_TIMEOUT_MS)`,
      };
    }
    const cause = (error as { cause?: { code?: string } }).cause;
    return { ok: false, reason: `the endpoint could not be reached${cause?.code ? ` (${cause.code})` : ''}` };
  }
}
