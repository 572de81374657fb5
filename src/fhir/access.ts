import type { FhirAction } from '../auth/principal.js';
import { AppError } from '../errors.js';
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
