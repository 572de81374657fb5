import { describe, expect, it } from 'vitest';
import { parsePostgresTargets } from './targets.js';

describe('PostgreSQL targets (libpq multi-host URLs)', () => {
  it('keeps a one-host URL as it is', () => {
    expect(parsePostgresTargets('postgres://app:secret@db.example:5432/fhir?sslmode=require')).toEqual({
      urls: ['postgres://app:secret@db.example:5432/fhir?sslmode=require'],
      targetSessionAttrs: 'any',
    });
  });

  it('splits a host list into one URL per host, in order, with the credentials, path and other parameters', () => {
    expect(
      parsePostgresTargets(
        'postgresql://app:pw@h1:5432,h2:5433,[::1]:5434/fhir?target_session_attrs=read-write&sslmode=prefer',
      ),
    ).toEqual({
      urls: [
        'postgresql://app:pw@h1:5432/fhir?sslmode=prefer',
        'postgresql://app:pw@h2:5433/fhir?sslmode=prefer',
        'postgresql://app:pw@[::1]:5434/fhir?sslmode=prefer',
      ],
      targetSessionAttrs: 'read-write',
    });
  });

  it('takes hosts without user or port, and primary as the other name for read-write', () => {
    expect(parsePostgresTargets('postgres://h1,h2/db?target_session_attrs=primary')).toEqual({
      urls: ['postgres://h1/db', 'postgres://h2/db'],
      targetSessionAttrs: 'primary',
    });
  });

  it('names what is wrong, without the password', () => {
    expect(() => parsePostgresTargets('postgres://u:topsecret@h1,,h2/db')).toThrow(/empty host/);
    expect(() => parsePostgresTargets('postgres://u:topsecret@h1/db?target_session_attrs=standby')).toThrow(
      /target_session_attrs must be one of any, read-write, primary, got "standby"/,
    );
    expect(() => parsePostgresTargets('mysql://u:topsecret@h1/db')).toThrow(/not a postgres:\/\/ URL/);
    try {
      parsePostgresTargets('postgres://u:topsecret@h1,,h2/db');
    } catch (error) {
      expect((error as Error).message).not.toContain('topsecret');
    }
  });
});
