// The terminology operations (https://hl7.org/fhir/R4/terminology-service.html): ValueSet $expand and
// $validate-code, CodeSystem $lookup and $validate-code, on the type and (but $lookup) on an instance.
// The engine (terminology/engine.ts) computes; this file reads the operation's parameters (the query of
// a GET, the Parameters body of a POST), finds the stored ValueSets and CodeSystems it asks for, and
// checks the caller's scopes: read or search on ValueSet (CodeSystem for the CodeSystem operations).
import type { FhirAction, Principal } from '../../auth/principal.js';
import { AppError } from '../../errors.js';
import type { CodeSystemResource, Coding, ValueSetResource } from '../../definitions/terminology.js';
import { LIMITS, TerminologyEngine, type StoredTerminology } from '../../terminology/engine.js';
import { requireAnyAccess } from '../access.js';
import { assertValidId } from '../ids.js';
import { storedResourceBody } from '../stored-content.js';
import type { FhirResponse } from '../response.js';
import type { FhirRequest } from '../services.js';

type TerminologyType = 'ValueSet' | 'CodeSystem';
const ANY_READ: readonly FhirAction[] = ['read', 'search'];

interface Parameter {
  name: string;
  resource?: unknown;
  part?: unknown;
  [value: string]: unknown;
}

/** An operation's parameters, from a GET's query or a POST's Parameters body, read the same way. */
class OperationParameters {
  private constructor(
    private readonly list: readonly Parameter[],
    private readonly fromQuery: boolean,
  ) {}

  static of(method: 'GET' | 'POST', query: readonly (readonly [string, string])[], body: unknown): OperationParameters {
    if (method === 'GET' || body === undefined || body === null || body === '') {
      return new OperationParameters(
        query.filter(([name]) => !name.startsWith('_')).map(([name, value]) => ({ name, valueString: value })),
        true,
      );
    }
    if (
      typeof body !== 'object' ||
      Array.isArray(body) ||
      (body as { resourceType?: unknown }).resourceType !== 'Parameters'
    ) {
      throw new AppError('bad-request', 'POST a Parameters resource to a terminology operation');
    }
    const parameters = (body as { parameter?: unknown }).parameter ?? [];
    if (!Array.isArray(parameters)) {
      throw new AppError('bad-request', 'Parameters.parameter must be an array of parameters', {
        expression: 'Parameters.parameter',
      });
    }
    parameters.forEach((p: unknown, i) => {
      if (!p || typeof p !== 'object' || Array.isArray(p) || typeof (p as Parameter).name !== 'string') {
        throw new AppError('bad-request', `Parameters.parameter[${i}] must be an object with a name`, {
          expression: `Parameters.parameter[${i}]`,
        });
      }
    });
    return new OperationParameters(parameters as Parameter[], false);
  }

  private all(name: string): Parameter[] {
    return this.list.filter((p) => p.name === name);
  }

  private one(name: string): Parameter | undefined {
    const found = this.all(name);
    if (found.length > 1) throw new AppError('bad-request', `The parameter ${name} is given more than once`);
    return found[0];
  }

  /** A primitive parameter (valueUri, valueCode, valueString...) as text. */
  string(name: string): string | undefined {
    const parameter = this.one(name);
    return parameter === undefined ? undefined : primitive(parameter, name);
  }

  strings(name: string): string[] {
    return this.all(name).map((p) => primitive(p, name));
  }

  integer(name: string, max: number): number | undefined {
    const parameter = this.one(name);
    if (parameter === undefined) return undefined;
    const value = this.fromQuery ? parameter.valueString : (parameter.valueInteger ?? parameter.valueString);
    const number = typeof value === 'string' && /^\d{1,9}$/.test(value) ? Number(value) : value;
    if (typeof number !== 'number' || !Number.isInteger(number) || number < 0 || number > max) {
      throw new AppError('bad-request', `The parameter ${name} must be an integer from 0 to ${max}`);
    }
    return number;
  }

  /** A complex parameter (`coding`, `codeableConcept`): only in a Parameters body. */
  complex(name: string, type: 'Coding' | 'CodeableConcept'): Record<string, unknown> | undefined {
    const parameter = this.one(name);
    if (parameter === undefined) return undefined;
    if (this.fromQuery) {
      throw new AppError('bad-request', `The parameter ${name} is a ${type}: send it in a Parameters body (POST)`);
    }
    const value = parameter[`value${type}`];
    if (!value || typeof value !== 'object' || Array.isArray(value)) {
      throw new AppError('bad-request', `The parameter ${name} must have a value${type}`);
    }
    return value as Record<string, unknown>;
  }

  resource(name: string): Record<string, unknown> | undefined {
    const parameter = this.one(name);
    if (parameter === undefined) return undefined;
    if (this.fromQuery)
      throw new AppError('bad-request', `The parameter ${name} is a resource: send it in a Parameters body (POST)`);
    const resource = parameter.resource;
    if (!resource || typeof resource !== 'object' || Array.isArray(resource)) {
      throw new AppError('bad-request', `The parameter ${name} must carry a resource`);
    }
    return resource as Record<string, unknown>;
  }
}

function primitive(parameter: Parameter, name: string): string {
  const entry = Object.entries(parameter).find(([key]) => key.startsWith('value'));
  const value = entry?.[1];
  if (typeof value !== 'string' || value === '') {
    throw new AppError(
      'bad-request',
      `The parameter ${name} must have a non-empty text value (valueUri, valueCode, valueString...)`,
    );
  }
  return value;
}

function codingOf(value: Record<string, unknown>, name: string): Coding {
  const coding: Coding = {};
  for (const key of ['system', 'version', 'code', 'display'] as const) {
    const v = value[key];
    if (v === undefined) continue;
    if (typeof v !== 'string' || v === '')
      throw new AppError('bad-request', `${name}.${key} must be a non-empty string`);
    coding[key] = v;
  }
  if (coding.code === undefined) throw new AppError('bad-request', `${name} has no code`);
  return coding;
}

/** The codings to validate: `code` (+ `system`, `display`), or `coding`, or `codeableConcept`; exactly one. */
function codingsToValidate(params: OperationParameters): Coding[] {
  const code = params.string('code');
  const coding = params.complex('coding', 'Coding');
  const concept = params.complex('codeableConcept', 'CodeableConcept');
  const given = [code, coding, concept].filter((v) => v !== undefined).length;
  if (given !== 1) {
    throw new AppError('bad-request', 'Give one of code (with system), coding or codeableConcept');
  }
  if (code !== undefined) {
    const system = params.string('system');
    const display = params.string('display');
    return [{ code, ...(system !== undefined ? { system } : {}), ...(display !== undefined ? { display } : {}) }];
  }
  if (coding) return [codingOf(coding, 'coding')];
  const codings = concept!.coding;
  if (!Array.isArray(codings) || codings.length === 0) {
    throw new AppError('bad-request', 'codeableConcept has no coding to validate');
  }
  return codings.map((c: unknown, i) => {
    if (!c || typeof c !== 'object' || Array.isArray(c))
      throw new AppError('bad-request', `codeableConcept.coding[${i}] must be a Coding`);
    return codingOf(c as Record<string, unknown>, `codeableConcept.coding[${i}]`);
  });
}

/** A principal that may also search `type` where it may read it: finding a ValueSet by url is part of the operation. */
function findingPrincipal(principal: Principal, type: TerminologyType): Principal {
  return {
    accountId: principal.accountId,
    username: principal.username,
    scopes: principal.scopes,
    hasScope: (scope) => principal.hasScope(scope),
    canFhir: (action, t) =>
      principal.canFhir(action, t) || (t === type && action === 'search' && principal.canFhir('read', t)),
  };
}

/**
 * The stored ValueSets and CodeSystems with a url, searched by `url` as the caller: a type the caller may
 * neither read nor search is not looked into (the R4 ones still answer). Each url once per request.
 */
export function storedTerminology(request: FhirRequest): StoredTerminology {
  const cache = new Map<string, Promise<unknown[]>>();
  const find = (type: TerminologyType, url: string): Promise<unknown[]> => {
    if (!ANY_READ.some((action) => request.principal.canFhir(action, type))) return Promise.resolve([]);
    const key = `${type} ${url}`;
    let found = cache.get(key);
    if (!found) {
      if (cache.size >= LIMITS.maxLookups) {
        throw new AppError(
          'expansion-too-costly',
          `This request names more than ${LIMITS.maxLookups} value sets and code systems to look up`,
        );
      }
      found = searchByUrl({ ...request, principal: findingPrincipal(request.principal, type) }, type, url);
      cache.set(key, found);
    }
    return found;
  };
  return {
    valueSets: async (url) => (await find('ValueSet', url)) as ValueSetResource[],
    codeSystems: async (url) => (await find('CodeSystem', url)) as CodeSystemResource[],
  };
}

/** Versions of one canonical a server holds are few; past this many, the latest-first page is what is used. */
const MAX_STORED_VERSIONS = 50;

async function searchByUrl(request: FhirRequest, type: TerminologyType, url: string): Promise<unknown[]> {
  const response = await request.services.search.search(
    request,
    type,
    [
      ['url', url],
      ['_count', String(MAX_STORED_VERSIONS)],
    ],
    { strict: true },
  );
  const body = typeof response.body === 'string' ? (JSON.parse(response.body) as unknown) : response.body;
  const entries =
    (body as { entry?: { resource?: { resourceType?: string; url?: string } }[] } | undefined)?.entry ?? [];
  // Exactly the url: the uri search matches it exactly, this keeps it so whatever the index does.
  return entries.map((e) => e.resource).filter((r) => r?.resourceType === type && r.url === url);
}

async function storedInstance(
  request: FhirRequest,
  type: TerminologyType,
  id: string,
): Promise<Record<string, unknown>> {
  assertValidId(id);
  const current = await request.services.store.read(type, id, { readAfter: request.budget?.readAfter });
  if (!current) throw new AppError('resource-not-found', `${type}/${id} is not known`);
  if (current.deleted) throw new AppError('resource-deleted', `${type}/${id} was deleted`);
  const body = storedResourceBody(current.content ?? '', type, id, current.versionId);
  return (typeof body === 'string' ? JSON.parse(body) : body) as Record<string, unknown>;
}

/** An inline ValueSet or CodeSystem: held to the R4 rules before the engine walks it (400 otherwise). */
function inlineResource(request: FhirRequest, resource: Record<string, unknown>, type: TerminologyType, name: string) {
  if (resource.resourceType !== type) throw new AppError('bad-request', `The parameter ${name} must be a ${type}`);
  const error = request.services.validate(resource).find((issue) => issue.severity === 'error');
  if (error) {
    throw new AppError('bad-request', `The ${type} in the parameter ${name} is not valid R4: ${error.diagnostics}`, {
      expression: error.expression,
    });
  }
  return resource;
}

export interface OperationCall {
  readonly method: 'GET' | 'POST';
  readonly query: readonly (readonly [string, string])[];
  readonly body: unknown;
  /** The instance form's id. */
  readonly id?: string;
}

async function valueSetOf(
  request: FhirRequest,
  engine: TerminologyEngine,
  call: OperationCall,
  params: OperationParameters,
): Promise<ValueSetResource> {
  const url = params.string('url');
  const version = params.string('valueSetVersion');
  const inline = params.resource('valueSet');
  if (call.id !== undefined) {
    if (url !== undefined || inline !== undefined) {
      throw new AppError('bad-request', 'The instance form names its value set: give neither url nor valueSet');
    }
    return (await storedInstance(request, 'ValueSet', call.id)) as unknown as ValueSetResource;
  }
  if (inline !== undefined) {
    if (url !== undefined) throw new AppError('bad-request', 'Give url or valueSet, not both');
    return inlineResource(request, inline, 'ValueSet', 'valueSet') as unknown as ValueSetResource;
  }
  if (url === undefined)
    throw new AppError('bad-request', 'Name the value set: url (or valueSet in a POST, or ValueSet/{id}/$...)');
  return engine.requireValueSet(url, version);
}

/** `GET|POST /fhir/ValueSet/$expand`, `/fhir/ValueSet/{id}/$expand`. */
export async function expandInteraction(request: FhirRequest, call: OperationCall): Promise<FhirResponse> {
  requireAnyAccess(request, ANY_READ, 'ValueSet');
  const params = OperationParameters.of(call.method, call.query, call.body);
  const engine = new TerminologyEngine(storedTerminology(request));
  const vs = await valueSetOf(request, engine, call, params);
  const filter = params.string('filter');
  const count = params.integer('count', LIMITS.maxCount);
  const offset = params.integer('offset', LIMITS.maxExpansion);
  const echo: { name: string; [value: string]: unknown }[] = [];
  for (const name of ['url', 'valueSetVersion', 'filter'] as const) {
    const value = params.string(name);
    if (value !== undefined) echo.push({ name, [name === 'url' ? 'valueUri' : 'valueString']: value });
  }
  if (offset !== undefined) echo.push({ name: 'offset', valueInteger: offset });
  if (count !== undefined) echo.push({ name: 'count', valueInteger: count });
  const body = await engine.expand(vs, { filter, offset, count, parameters: echo });
  return { status: 200, body: body as unknown as Record<string, unknown> };
}

/** `GET|POST /fhir/ValueSet/$validate-code`, `/fhir/ValueSet/{id}/$validate-code`. */
export async function valueSetValidateCodeInteraction(
  request: FhirRequest,
  call: OperationCall,
): Promise<FhirResponse> {
  requireAnyAccess(request, ANY_READ, 'ValueSet');
  const params = OperationParameters.of(call.method, call.query, call.body);
  const engine = new TerminologyEngine(storedTerminology(request));
  const codings = codingsToValidate(params);
  const vs = await valueSetOf(request, engine, call, params);
  const body = await engine.validateInValueSet(vs, codings);
  return { status: 200, body: body as unknown as Record<string, unknown> };
}

async function codeSystemOf(
  request: FhirRequest,
  engine: TerminologyEngine,
  call: OperationCall,
  params: OperationParameters,
  codingSystem: string | undefined,
): Promise<CodeSystemResource> {
  const url = params.string('url');
  const version = params.string('version');
  const inline = params.resource('codeSystem');
  if (call.id !== undefined) {
    if (url !== undefined || inline !== undefined) {
      throw new AppError('bad-request', 'The instance form names its code system: give neither url nor codeSystem');
    }
    const stored = (await storedInstance(request, 'CodeSystem', call.id)) as unknown as CodeSystemResource;
    return engine.servable(stored, `CodeSystem/${call.id}`);
  }
  if (inline !== undefined) {
    if (url !== undefined) throw new AppError('bad-request', 'Give url or codeSystem, not both');
    const cs = inlineResource(request, inline, 'CodeSystem', 'codeSystem') as unknown as CodeSystemResource;
    return engine.servable(cs, 'the codeSystem parameter');
  }
  // Without url, the system of the codings names it (when they agree on one).
  const named = url ?? codingSystem;
  if (named === undefined) {
    throw new AppError('bad-request', 'Name the code system: url (or codeSystem in a POST, or a coding with a system)');
  }
  return engine.requireCodeSystem(named, version);
}

/** `GET|POST /fhir/CodeSystem/$validate-code`, `/fhir/CodeSystem/{id}/$validate-code`. */
export async function codeSystemValidateCodeInteraction(
  request: FhirRequest,
  call: OperationCall,
): Promise<FhirResponse> {
  requireAnyAccess(request, ANY_READ, 'CodeSystem');
  const params = OperationParameters.of(call.method, call.query, call.body);
  const engine = new TerminologyEngine(storedTerminology(request));
  const codings = codingsToValidate(params);
  const systems = new Set(codings.map((coding) => coding.system).filter((system) => system !== undefined));
  const cs = await codeSystemOf(request, engine, call, params, systems.size === 1 ? [...systems][0] : undefined);
  const body = await engine.validateInCodeSystem(cs, codings);
  return { status: 200, body: body as unknown as Record<string, unknown> };
}

/** `GET|POST /fhir/CodeSystem/$lookup`: `system` and `code`, or `coding`. */
export async function lookupInteraction(request: FhirRequest, call: OperationCall): Promise<FhirResponse> {
  requireAnyAccess(request, ANY_READ, 'CodeSystem');
  const params = OperationParameters.of(call.method, call.query, call.body);
  const engine = new TerminologyEngine(storedTerminology(request));
  const codingValue = params.complex('coding', 'Coding');
  const given: Coding = { system: params.string('system'), code: params.string('code') };
  if (codingValue && (given.system !== undefined || given.code !== undefined)) {
    throw new AppError('bad-request', 'Give system and code, or coding, not both');
  }
  const { system, code, version = params.string('version') } = codingValue ? codingOf(codingValue, 'coding') : given;
  if (system === undefined || code === undefined) {
    throw new AppError('bad-request', '$lookup needs system and code (or a coding with both)');
  }
  const cs = await engine.requireCodeSystem(system, version);
  const body = engine.lookup(cs, code, params.strings('property'));
  return { status: 200, body: body as unknown as Record<string, unknown> };
}
