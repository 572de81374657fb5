// Our profile verdicts against the HL7 Java reference validator's recorded outcomes (docs/validation.md,
// "The HL7 validator's profile cases"): for each R4 JSON case of fhir-test-cases that validates an instance
// against a profile held in the corpus, the case's ValueSets, CodeSystems and StructureDefinitions are stored
// through the API and the instance is sent to $validate with that profile. Our verdict (any error or none)
// must equal Java's, except for the disagreements listed, with their reasons, in
// support/known-profile-disagreements.ts. One database suffices: nothing here depends on the storage.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readElements } from '../src/profiles/elements.js';
import { fixturesDir } from './support/fixtures.js';
import { KNOWN_PROFILE_DISAGREEMENTS, REFUSED_PROFILES } from './support/known-profile-disagreements.js';
import { startTestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';
import type { TestApp } from './support/test-app.js';

interface IndexEntry {
  name: string;
  file: string;
  profile: string;
  supporting: string[];
  expectedValid: boolean;
}

interface Outcome {
  resourceType: string;
  issue: { severity: string; code: string; diagnostics?: string; expression?: string[] }[];
}

type Resource = Record<string, any>;

const casesDir = join(fixturesDir(), 'fhir-test-cases-validator-r4-profiles');
const readJson = <T>(file: string): T => JSON.parse(readFileSync(join(casesDir, file), 'utf8')) as T;

/**
 * What R4 requires of a StructureDefinition and a listed profile leaves out, filled in without changing what
 * it constrains: a status, a name, `abstract` as a boolean, and element ids as the server itself reads them
 * (from paths and slice names, src/profiles/elements.ts).
 */
function repairProfile(profile: Resource): Resource {
  const repaired: Resource = structuredClone(profile);
  repaired.status ??= 'draft';
  repaired.name ??= String(repaired.url)
    .replace(/^.*\//, '')
    .replace(/[^A-Za-z0-9]/g, '');
  if (typeof repaired.abstract === 'string') repaired.abstract = repaired.abstract === 'true';
  for (const part of ['snapshot', 'differential']) {
    const elements: Resource[] | undefined = repaired[part]?.element;
    if (!elements) continue;
    const ids = readElements(elements, `StructureDefinition.${part}`, repaired.type).map((e) => e.id);
    elements.forEach((element, i) => (element.id ??= ids[i]));
  }
  return repaired;
}

describe.skipIf(!existsSync(casesDir))('HL7 validator test cases (R4, profiles)', () => {
  const index = existsSync(casesDir) ? readJson<IndexEntry[]>('index.json') : [];
  const refusals = new Map(REFUSED_PROFILES.map((r) => [r.file, r]));
  const knownDisagreements = new Map(KNOWN_PROFILE_DISAGREEMENTS.map((d) => [d.name, d]));
  const refusedAsIs = new Set<string>();
  const agreed: string[] = [];
  let app: TestApp;
  let fhir: FhirClient;

  beforeAll(async () => {
    app = await startTestApp('sqlite');
    fhir = await app.client();
  });
  afterAll(() => app?.close());

  /**
   * Stores a file by its url (a conditional update: cases reuse urls with other content). A refusal must be
   * the listed one; a repairable profile is then stored repaired.
   */
  async function store(file: string): Promise<void> {
    const { id: _id, ...resource } = readJson<Resource>(file);
    const put = (body: Resource) => fhir.put(`/fhir/${body.resourceType}?url=${encodeURIComponent(body.url)}`, body);
    const res = await put(resource);
    if (res.statusCode < 300) return;
    const refusal = refusals.get(file);
    expect(refusal, `${file} refused: ${res.body}`).toBeDefined();
    const diagnostics = res.json<Outcome>().issue.map((i) => i.diagnostics);
    expect(diagnostics.join('\n'), refusal!.reason).toContain(refusal!.refusal);
    refusedAsIs.add(file);
    if (!refusal!.repairable) return;
    const repaired = await put(repairProfile(resource));
    expect(repaired.statusCode, repaired.body).toBeLessThan(300);
  }

  it('selects the R4 JSON profile cases', () => {
    expect(index.length).toBeGreaterThanOrEqual(30);
    for (const { name } of KNOWN_PROFILE_DISAGREEMENTS) expect(index.map((c) => c.name)).toContain(name);
  });

  it.each(index.map((entry) => [entry.name, entry] as const))('%s', async (_name, entry) => {
    for (const file of [...entry.supporting, entry.profile]) await store(file);
    const instance = readJson<Resource>(entry.file);
    const url = readJson<{ url: string }>(entry.profile).url;
    const res = await fhir.post(
      `/fhir/${instance.resourceType}/$validate?profile=${encodeURIComponent(url)}`,
      instance,
    );
    expect(res.statusCode, res.body).toBe(200);
    const outcome = res.json<Outcome>();
    expect(outcome.resourceType).toBe('OperationOutcome');
    const errors = outcome.issue.filter((i) => i.severity === 'error' || i.severity === 'fatal');
    const weSayValid = errors.length === 0;
    const known = knownDisagreements.get(entry.name);
    const issues = outcome.issue.map((i) => `${i.severity}: ${i.diagnostics}`);
    if (known) {
      expect(known.expected).toBe(entry.expectedValid ? 'valid' : 'invalid');
      expect(weSayValid, `listed as a known disagreement: ${known.reason}\n${issues.join('\n')}`).toBe(
        !entry.expectedValid,
      );
    } else {
      expect(weSayValid, `Java says ${entry.expectedValid ? 'valid' : 'invalid'}; we said:\n${issues.join('\n')}`).toBe(
        entry.expectedValid,
      );
      agreed.push(entry.name);
    }
  });

  it('refuses exactly the listed StructureDefinitions, and prints the agreement', () => {
    expect([...refusedAsIs].sort()).toEqual(REFUSED_PROFILES.map((r) => r.file).sort());
    console.log(`profile cases: ${agreed.length} of ${index.length} agree with the HL7 Java validator`);
    expect(agreed.length + KNOWN_PROFILE_DISAGREEMENTS.length).toBe(index.length);
  });
});
