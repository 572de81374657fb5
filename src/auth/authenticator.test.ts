import { describe, expect, it } from 'vitest';
import type { Account } from './accounts.js';
import { currentPrincipal } from './authenticator.js';

const account = (changes: Partial<Account> = {}): Account => ({
  id: 'a1',
  username: 'exporter',
  active: true,
  apiAccess: true,
  scopes: ['system/Binary.rs', 'system/Patient.r'],
  rateLimit: null,
  tokensNotBefore: 0,
  tokenGeneration: 0,
  clientKeys: [],
  createdAt: '2026-01-01T00:00:00Z',
  updatedAt: '2026-01-01T00:00:00Z',
  ...changes,
});
const store = (found: Account | undefined) => ({
  findById: async (id: string) => (id === found?.id ? found : undefined),
});

describe('currentPrincipal (work that runs after its request: an export job)', () => {
  it("grants the token's scopes within the account's scopes as they are now", async () => {
    const narrowed = await currentPrincipal(store(account()), 'a1', ['system/Binary.rs']);
    expect(narrowed?.canFhir('read', 'Binary')).toBe(true);
    expect(narrowed?.canFhir('read', 'Patient')).toBe(false);
    const shrunk = await currentPrincipal(store(account({ scopes: ['system/Binary.rs'] })), 'a1', [
      'system/Binary.rs',
      'system/Patient.r',
    ]);
    expect(shrunk?.canFhir('read', 'Binary')).toBe(true);
    expect(shrunk?.canFhir('read', 'Patient')).toBe(false);
    // A job stored without the token's scopes: the account's.
    expect((await currentPrincipal(store(account()), 'a1', undefined))?.canFhir('read', 'Patient')).toBe(true);
  });

  it('is nobody once the account is deleted, inactive or without API access', async () => {
    const scopes = ['system/*.cruds'];
    expect(await currentPrincipal(store(undefined), 'a1', scopes)).toBeUndefined();
    expect(await currentPrincipal(store(account({ active: false })), 'a1', scopes)).toBeUndefined();
    expect(await currentPrincipal(store(account({ apiAccess: false })), 'a1', scopes)).toBeUndefined();
  });
});
