// The statements of `_include:iterate`, on both databases (dialect.ts jsonIntegers, compile.ts
// compileInclude): each round of an include binds its frontier into one statement text, compiled once,
// so a deep iteration is one prepared statement run again, never a text per round or per frontier size.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { loadR4Definitions } from '../definitions/registry.js';
import { createFhirServices } from '../services.js';
import type { FhirServices } from '../fhir/services.js';
import { migrate } from '../storage/migrate.js';
import { openDatabase } from '../storage/open-database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { BACKENDS, testDatabase } from '../../test/support/databases.js';
import type { TestDatabase } from '../../test/support/databases.js';
import { allowAll } from '../../test/support/search-env.js';
import { logStatements } from '../../test/support/statement-log.js';
import type { StatementLog } from '../../test/support/statement-log.js';

describe.each(BACKENDS)('statements of _include:iterate on %s', (backend) => {
  let database: TestDatabase;
  let raw: SqlDatabase;
  let services: FhirServices;
  const log: StatementLog = [];

  beforeAll(async () => {
    database = await testDatabase(backend);
    raw = openDatabase(database.url);
    await migrate(raw);
    services = createFhirServices(
      loadConfig({ DATABASE_URL: database.url }),
      logStatements(raw, log),
      loadR4Definitions(),
    );
  });

  afterAll(async () => {
    await raw?.close();
    await database?.dispose();
  });

  it('runs every round of every include as one statement text', async () => {
    // A Patient managed by the last of a chain of five Organizations, each part of the one before.
    let parent: string | undefined;
    for (let i = 0; i < 5; i++) {
      const organization = {
        resourceType: 'Organization',
        name: `Level ${i}`,
        ...(parent ? { partOf: { reference: `Organization/${parent}` } } : {}),
      };
      parent = (await services.store.create(organization)).stored.id;
    }
    const patient = await services.store.create({
      resourceType: 'Patient',
      managingOrganization: { reference: `Organization/${parent}` },
    });
    log.length = 0;
    const response = await services.search.search(
      { services, principal: allowAll },
      'Patient',
      [
        ['_id', patient.stored.id],
        ['_include', 'Patient:organization'],
        ['_include:iterate', 'Organization:partof'],
      ],
      { strict: true },
    );
    const bundle = JSON.parse(response.body as string) as { entry: { resource: { resourceType: string } }[] };
    expect(bundle.entry.filter((e) => e.resource.resourceType === 'Organization')).toHaveLength(5);
    // One round per Organization it reached (the Patient's, then each one above it), one text for all:
    // the search parameter and the types are bound too, like the frontier.
    const includes = log.filter((sql) => sql.includes(raw.dialect.jsonIntegers));
    expect(includes.length).toBeGreaterThanOrEqual(5);
    expect(new Set(includes).size).toBe(1);
  });
});
