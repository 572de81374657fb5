// Our base validator (src/validation/validate.ts) against an independent one that runs here without a
// network: FHIR.js, the npm `fhir` package, on its own copy of the R4 definitions (docs/validation.md,
// "FHIR.js"). Both judge the same corpus, "valid or not": a deterministic sample of the R4 spec's examples,
// and deterministic breakages of each (a required element removed, a primitive of the wrong JSON type, an
// unknown element, a code outside a required value set, an impossible date, an unreferenced contained
// resource). Each disagreement falls in a category below, with its count and why; a new category or a
// changed count fails the test.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Fhir, ParseConformance } from 'fhir';
import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../src/definitions/registry.js';
import type { ElementRule } from '../src/definitions/registry.js';
import { validateResource } from '../src/validation/validate.js';
import { fixturesDir } from './support/fixtures.js';

type Json = Record<string, unknown>;

const registry = loadR4Definitions();
const fhirJs = new Fhir();

/**
 * Every 8th example in the file's order, every kind of resource in proportion, but the few over 20 kB
 * (large Bundles and StructureDefinitions, 40% of the bytes): 303 of 2,459.
 */
const SAMPLE_STRIDE = 8;
const SAMPLE_MAX_CHARS = 20_000;

/** The lines of all-r4-examples.ndjson.gz, one example each. */
function exampleLines(): string[] {
  const path = join(fixturesDir(), 'r4-spec-examples', 'all-r4-examples.ndjson.gz');
  return gunzipSync(readFileSync(path))
    .toString('utf8')
    .split('\n')
    .filter((line) => line.trim());
}

function sample(): Json[] {
  return exampleLines()
    .filter((line, i) => i % SAMPLE_STRIDE === 0 && line.length <= SAMPLE_MAX_CHARS)
    .map((line) => JSON.parse(line) as Json);
}

/** The top-level elements of a resource's type present in it, in the type's order, without choices. */
function presentElements(resource: Json): [string, ElementRule][] {
  const type = registry.type(String(resource.resourceType));
  if (!type) return [];
  return Object.entries(type.elements).filter(
    ([path, rule]) => !path.includes('.') && !rule.choice && resource[path] !== undefined,
  );
}

const onlyType = (rule: ElementRule) => (rule.types?.length === 1 ? rule.types[0].code : undefined);

interface Breakage {
  /** What was done, naming the kind of element: the disagreement categories are keyed by it. */
  label: string;
  resource: Json;
}

/** The deterministic breakages of one example: each applies where the example has an element to break. */
function breakages(resource: Json): Breakage[] {
  const out: Breakage[] = [];
  const elements = presentElements(resource);
  const ownElements = elements.filter(([path]) => !registry.type('DomainResource')!.elements[path]);
  const edit = (label: string, change: (copy: Json) => void) => {
    const copy = structuredClone(resource);
    change(copy);
    out.push({ label, resource: copy });
  };

  const required = Object.entries(registry.type(String(resource.resourceType))?.elements ?? {}).find(
    ([path, rule]) => !path.includes('.') && !rule.choice && (rule.min ?? 0) > 0 && resource[path] !== undefined,
  );
  if (required) edit('required element removed', (copy) => delete copy[required[0]]);

  // The first element of each JSON kind that the resource type itself defines (not Resource's id or language).
  for (const kind of ['string', 'number', 'boolean'] as const) {
    const primitive = ownElements.find(([, rule]) => {
      const code = onlyType(rule);
      return code !== undefined && registry.primitiveType(code)?.json === kind && rule.max === undefined;
    });
    if (!primitive) continue;
    const wrong = { string: 12345, number: '12', boolean: 'true' }[kind];
    edit(`${kind} element given a JSON ${typeof wrong}`, (copy) => (copy[primitive[0]] = wrong));
  }

  edit('unknown element', (copy) => (copy.unknownElement = 'x'));

  const coded = elements.find(([, rule]) => {
    if (onlyType(rule) !== 'code' || !rule.binding || rule.max !== undefined) return false;
    const valueSet = registry.valueSet(rule.binding);
    return valueSet !== undefined && 'codes' in valueSet;
  });
  if (coded) edit('code outside its required value set', (copy) => (copy[coded[0]] = 'not-a-code'));

  const dated = elements.find(([, rule]) => ['date', 'dateTime', 'instant'].includes(onlyType(rule) ?? ''));
  if (dated && dated[1].max === undefined) {
    edit(`${onlyType(dated[1])} 1970-13-45`, (copy) => (copy[dated[0]] = '1970-13-45'));
  }

  if (registry.type(String(resource.resourceType))?.base === 'DomainResource') {
    // dom-3: a contained resource must be referred to from the resource, or refer to it.
    edit('unreferenced contained resource (dom-3)', (copy) => {
      const contained = Array.isArray(copy.contained) ? copy.contained : [];
      copy.contained = [...contained, { resourceType: 'Basic', id: 'unreferenced', code: { text: 'x' } }];
    });
  }
  return out;
}

const oursValid = (resource: Json) => !validateResource(resource, registry).some((i) => i.severity === 'error');
/** FHIR.js with its default options (an unknown property is a warning: EXPECTED_DISAGREEMENTS). */
const fhirJsValid = (resource: Json, fhir = fhirJs) => fhir.validate(structuredClone(resource)).valid;

const NO_INVARIANTS = 'FHIR.js evaluates no invariants (the FHIRPath constraints of the definitions).';
const UNANCHORED_DATES =
  "FHIR.js tests dates and dateTimes with the spec's regular expressions unanchored, so any text that starts " +
  'with a year matches; it does not check instants at all.';

/** Each kind of disagreement on the sample: how many, and why. */
const EXPECTED_DISAGREEMENTS: Record<string, { count: number; why: string }> = {
  'spec example as it is: only we reject': {
    count: 1,
    why: `StructureDefinition/FiveWs breaks sdf-4 (test/support/known-invalid-examples.ts). ${NO_INVARIANTS}`,
  },
  'unknown element: only we reject': {
    count: 303,
    why: 'FHIR.js reports an unknown property as a warning unless it is given errorOnUnexpected; json.html makes it an error.',
  },
  'unreferenced contained resource (dom-3): only we reject': { count: 301, why: NO_INVARIANTS },
  'string element given a JSON number: only we reject': {
    count: 231,
    why:
      "FHIR.js does not check that a string primitive is a JSON string: it tests the number against the type's " +
      'regular expression, unanchored (code, id, uri...), or not at all (string, markdown). Where it does reject ' +
      '12345, it is as a code not in the value set of the element.',
  },
  'dateTime 1970-13-45: only we reject': { count: 212, why: UNANCHORED_DATES },
  'instant 1970-13-45: only we reject': { count: 8, why: UNANCHORED_DATES },
  'date 1970-13-45: only we reject': { count: 4, why: UNANCHORED_DATES },
};

describe('cross-check with FHIR.js', () => {
  it('agrees but for the expected disagreements, each explained', () => {
    const disagreements: Record<string, number> = {};
    const byLabel = new Map<string, { cases: number; agree: number }>();
    const acceptedBreakages: string[] = [];
    for (const example of sample()) {
      const judged = [{ label: 'spec example as it is', resource: example }, ...breakages(example)];
      for (const { label, resource } of judged) {
        const ours = oursValid(resource);
        const theirs = fhirJsValid(resource);
        if (ours && resource !== example) acceptedBreakages.push(`${label}: ${example.resourceType}/${example.id}`);
        const tally = byLabel.get(label) ?? { cases: 0, agree: 0 };
        byLabel.set(label, { cases: tally.cases + 1, agree: tally.agree + (ours === theirs ? 1 : 0) });
        if (ours === theirs) continue;
        const key = `${label}: ${ours ? 'only FHIR.js rejects' : 'only we reject'}`;
        disagreements[key] = (disagreements[key] ?? 0) + 1;
      }
    }
    const total = [...byLabel.values()].reduce((sum, t) => ({
      cases: sum.cases + t.cases,
      agree: sum.agree + t.agree,
    }));
    console.log(
      [
        `FHIR.js cross-check: ${total.agree} of ${total.cases} verdicts agree (valid or not)`,
        ...[...byLabel].map(([label, t]) => `  ${label}: ${t.agree} of ${t.cases}`),
        'disagreements:',
        ...Object.entries(disagreements).map(
          ([key, count]) => `  ${key}: ${count}. ${EXPECTED_DISAGREEMENTS[key]?.why ?? 'NOT EXPECTED'}`,
        ),
      ].join('\n'),
    );
    // Every breakage breaks R4, or the categories would not mean what they say.
    expect(acceptedBreakages).toEqual([]);
    expect(disagreements).toEqual(
      Object.fromEntries(Object.entries(EXPECTED_DISAGREEMENTS).map(([key, { count }]) => [key, count])),
    );
  });

  it('FHIR.js rejects five valid spec examples, for two faults of its own', () => {
    const examples = exampleLines().map((line) => JSON.parse(line) as Json);
    const find = (key: string) => examples.find((e) => `${e.resourceType}/${e.id}` === key)!;
    const fhirJsErrors = (key: string) =>
      fhirJs
        .validate(structuredClone(find(key)))
        .messages.filter((m) => m.severity === 'error' || m.severity === 'fatal')
        .map((m) => `${m.location}: ${m.message}`);
    // A required choice whose value is false counts as missing (FHIR.js tests the value's truth, not its presence).
    for (const [key, choice] of [
      ['MedicationRequest/medrx0308', 'MedicationRequest.substitution.allowed[x]'],
      ['MedicationRequest/medrx0330', 'MedicationRequest.substitution.allowed[x]'],
      ['CodeSystem/example-supplement', 'CodeSystem.concept[0].property[0].value[x]'],
      ['Questionnaire/zika-virus-exposure-assessment', 'Questionnaire.item[1].enableWhen[0].answer[x]'],
    ]) {
      expect(oursValid(find(key)), key).toBe(true);
      expect(fhirJsErrors(key), key).toContain(`${choice}: Missing property`);
    }
    // A versioned reference (Patient/45/_history/2) is read as one to a resource of type "_history".
    expect(oursValid(find('Bundle/bundle-references'))).toBe(true);
    expect(fhirJsErrors('Bundle/bundle-references')).toEqual([
      'Observation.subject: Invalid type for reference {"reference":"Patient/45/_history/2"}',
    ]);
  });

  it('FHIR.js accepts a resource that breaks a profile it was given', () => {
    const profiles = join(fixturesDir(), 'profiles', 'hl7-r4-examples');
    const read = (file: string) => JSON.parse(readFileSync(join(profiles, file), 'utf8')) as Json;
    const heartRate = read('StructureDefinition-heartrate.json') as Json & {
      url: string;
      snapshot: { element: { id: string; min: number }[] };
    };
    const parser = new ParseConformance(true);
    parser.parseStructureDefinition(read('StructureDefinition-vitalsigns.json'));
    parser.parseStructureDefinition(heartRate);
    const withProfile = new Fhir(parser);
    expect(parser.structureDefinitions.map((sd: Json) => sd.url)).toContain(heartRate.url);

    // The profile requires a subject; the base Observation does not.
    expect(heartRate.snapshot.element.find((e) => e.id === 'Observation.subject')?.min).toBe(1);
    const { subject: _, ...noSubject } = read('Observation-heart-rate.json');
    const claimed: Json = { ...noSubject, meta: { profile: [heartRate.url] } };
    expect(oursValid(claimed)).toBe(true);
    const verdict = withProfile.validate(structuredClone(claimed));
    expect(verdict.valid).toBe(true);
    expect(verdict.messages.filter((m) => m.severity === 'error' || m.location === 'Observation.subject')).toEqual([]);
    // What R4 itself requires, it does check.
    const { status: __, ...noStatus } = claimed;
    expect(fhirJsValid(noStatus, withProfile)).toBe(false);
  });
});
