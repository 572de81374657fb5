import type { FhirAction } from '../auth/principal.js';
import { AppError } from '../errors.js';
import { localReferences } from '../storage/link-writer.js';
import type { FhirResource, ReplicaReads, ResourceStore } from '../storage/store.js';
import { binaryContextReadable, securityContextType } from './binary.js';
import type { FhirRequest } from './services.js';

const ACTION_LETTER: Record<FhirAction, string> = { create: 'c', read: 'r', update: 'u', delete: 'd', search: 's' };

/** Refuses (403) a request whose token's scopes do not cover `action` on `type`. */
export function requireAccess(request: FhirRequest, action: FhirAction, type: string): void {
  if (!request.principal.canFhir(action, type)) {
    throw new AppError(
      'forbidden',
      `The token's scopes do not allow ${action} on ${type} (needs system/${type}.${ACTION_LETTER[action]} or wider)`,
    );
  }
}

/** Refuses (403) a request whose token's scopes allow none of `actions` on `type`. */
export function requireAnyAccess(request: FhirRequest, actions: readonly FhirAction[], type: string): void {
  if (actions.some((action) => request.principal.canFhir(action, type))) return;
  const letters = actions.map((action) => `system/${type}.${ACTION_LETTER[action]}`).join(' or ');
  throw new AppError(
    'forbidden',
    `The token's scopes do not allow ${actions.join(' or ')} on ${type} (needs ${letters} or wider)`,
  );
}

/** The types whose resources the caller may read (and so be told about). */
export function mayRead(request: FhirRequest): (type: string) => boolean {
  return (type) => request.principal.canFhir('read', type);
}

/**
 * With AMBIENT_REFERENTIAL_INTEGRITY a write whose reference points at nothing is refused, so its answer
 * tells whether the target exists. A writer may therefore refer only to what it could look up anyway
 * (types it may read or search), to the resource it writes, or to what its transaction Bundle writes;
 * any other reference is a 403 whether or not its target exists (docs/api.md).
 */
export function requireKnowableReferences(request: FhirRequest, resource: FhirResource, id?: string): void {
  const services = request.services;
  if (!services.config.referentialIntegrity) return;
  const { principal } = request;
  for (const target of localReferences(resource, services.references)) {
    if (principal.canFhir('read', target.type) || principal.canFhir('search', target.type)) continue;
    if (target.type === resource.resourceType && target.id === id) continue;
    if (request.bundleTargets?.has(`${target.type}/${target.id}`)) continue;
    throw new AppError(
      'forbidden',
      `With referential integrity on, a reference to a ${target.type} needs system/${target.type}.r or .s (or wider): the check would tell whether it exists`,
    );
  }
}

/** Does a Binary's securityContext let the caller see its content? (Its own type's scope is checked apart.) */
export function mayReadBinary(request: FhirRequest, content: string | Record<string, unknown>): boolean {
  const { references, types } = request.services;
  return binaryContextReadable(content, references, types.resourceTypes, (t) => request.principal.canFhir('read', t));
}

/**
 * A Binary with a securityContext is read only by a caller who may read what it points to (docs/api.md):
 * 403 otherwise. Writing one that points at X needs read access to X's type, so that no one attaches
 * content to, or takes it from, records it may not see.
 */
export function requireBinaryContext(
  request: FhirRequest,
  content: string | Record<string, unknown>,
  doing: 'read' | 'write' | 'change',
): void {
  if (mayReadBinary(request, content)) return;
  const context = securityContextType(content, request.services.references);
  const needs = context === '*' ? 'system/*.r' : `system/${context}.r or wider`;
  throw new AppError(
    'forbidden',
    `This Binary's securityContext ${context === '*' ? 'names no resource of this server' : `points at a ${context}`}: to ${doing} it needs ${needs}`,
  );
}

/**
 * Update, patch and delete of a Binary act on the content it holds now: refused (403) when the caller may
 * not read what its current securityContext points at, whatever the new content says (a writer could
 * otherwise detach content from a record, replace it or delete it). `store` is the write's transaction:
 * the row stays locked until it ends, so the context checked is the one the write replaces.
 */
export async function requireBinaryChangeable(request: FhirRequest, store: ResourceStore, id: string): Promise<void> {
  const current = await store.read('Binary', id, { lock: true });
  if (current && !current.deleted && current.content) requireBinaryContext(request, current.content, 'change');
}

/**
 * A Binary's current securityContext rules every version of it, besides each version's own: content
 * attached to a Patient after it was written is not readable through its older versions. (A deleted
 * Binary has no current content; then each version's own context alone decides.)
 */
export async function binaryVersionsReadable(
  request: FhirRequest,
  versions: readonly { type: string; id: string; content: string | null }[],
  readAfter?: ReplicaReads['readAfter'],
): Promise<(version: { type: string; id: string; content: string | null }) => boolean> {
  const ids = [...new Set(versions.filter((v) => v.type === 'Binary').map((v) => v.id))];
  const hidden = new Set<string>();
  await Promise.all(
    ids.map(async (id) => {
      const current = await request.services.store.read('Binary', id, { readAfter });
      if (current?.content && !mayReadBinary(request, current.content)) hidden.add(id);
    }),
  );
  return (v) => v.type !== 'Binary' || (!hidden.has(v.id) && (!v.content || mayReadBinary(request, v.content)));
}
