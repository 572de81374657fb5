// The subscription tables as the dispatcher, the deliverer and the websocket hub read them, and the one
// way the server changes a Subscription's status: a new version of the resource, so that a client reading
// it sees what the server did (R4: `active` once checked, `error` with its text), and the row follows
// (index-writer.ts) in the same transaction.
import type { Principal } from '../auth/principal.js';
import type { FhirRequest, FhirServices } from '../fhir/services.js';
import { performance } from 'node:perf_hooks';
import type { ReadAfter, SqlExecutor } from '../storage/sql/database.js';

export type SubscriptionStatus = 'requested' | 'active' | 'off' | 'error';

export interface SubscriptionRow {
  readonly pk: number;
  readonly id: string;
  readonly status: SubscriptionStatus;
  readonly resourceType: string;
  readonly criteria: string;
  readonly channelType: 'rest-hook' | 'websocket';
  readonly endpoint: string | null;
  readonly payload: string | null;
  readonly headers: string[];
  readonly accountId: string | null;
  /** The scopes of the token that wrote it; null when it has no owner. */
  readonly scopes: string[] | null;
  readonly failures: number;
}

const SELECT = `SELECT pk, id, status, resource_type, criteria, channel_type, endpoint, payload, headers, account_id, scopes, failures FROM subscription`;

interface RawRow {
  pk: number | string;
  id: string;
  status: SubscriptionStatus;
  resource_type: string;
  criteria: string;
  channel_type: 'rest-hook' | 'websocket';
  endpoint: string | null;
  payload: string | null;
  headers: string;
  account_id: string | null;
  scopes: string | null;
  failures: number | string;
}

function fromRaw(row: RawRow): SubscriptionRow {
  return {
    pk: Number(row.pk),
    id: row.id,
    status: row.status,
    resourceType: row.resource_type,
    criteria: row.criteria,
    channelType: row.channel_type,
    endpoint: row.endpoint,
    payload: row.payload,
    headers: JSON.parse(row.headers) as string[],
    accountId: row.account_id,
    scopes: row.scopes === null ? null : (JSON.parse(row.scopes) as string[]),
    failures: Number(row.failures),
  };
}

export async function subscriptionsWhere(
  db: SqlExecutor,
  where: string,
  params: readonly (string | number)[],
): Promise<SubscriptionRow[]> {
  const rows = await db.query<RawRow>(`${SELECT} WHERE ${where}`, params);
  return rows.map(fromRaw);
}

/** Who a subscription notifies, as of now: its owner with the writing token's scopes within the account's current ones. */
export type SubscriberOf = (accountId: string, scopes: readonly string[]) => Promise<Principal | undefined>;

/**
 * The subscriber as a FHIR request (what the search engine and the access checks take); `readAfter`: a
 * replica may answer its searches once it has replayed that far.
 */
export function subscriberRequest(services: FhirServices, principal: Principal, readAfter?: ReadAfter): FhirRequest {
  if (!readAfter) return { services, principal };
  const limitMs = services.config.searchTimeoutMs;
  return { services, principal, budget: { deadline: performance.now() + limitMs, limitMs, readAfter } };
}

/**
 * Writes the Subscription's new status (and, for `error`, its text) as a new version, when its status now
 * is one of `from` (a client may have turned it off or changed it meanwhile: then its version stands).
 * Answers whether it was written.
 */
export async function setSubscriptionStatus(
  services: FhirServices,
  id: string,
  from: readonly SubscriptionStatus[],
  status: SubscriptionStatus,
  error?: string,
): Promise<boolean> {
  const { store } = services;
  const current = await store.read('Subscription', id);
  if (!current || current.deleted || !current.content) return false;
  const resource = JSON.parse(current.content) as Record<string, unknown> & { id: string; resourceType: string };
  if (!from.includes(resource.status as SubscriptionStatus)) return false;
  const { error: _previous, ...rest } = resource;
  const next = error === undefined ? { ...rest, status } : { ...rest, status, error };
  try {
    await store.writingAs('server').update(next, { ifMatch: current.versionId });
    return true;
  } catch (caught) {
    // Overtaken by a client's write: its version decides.
    if ((caught as { code?: string }).code === 'precondition-failed') return false;
    throw caught;
  }
}
