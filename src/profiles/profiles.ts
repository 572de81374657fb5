// Profiles (docs/validation.md, "Profiles"): the StructureDefinitions stored on the server, enforced on
// every create and update of a resource whose meta.profile names them, and on $validate's `profile`.
// Each write finds the current version of each profile it names with one indexed read of the profile
// table (index-writer.ts), so a profile updated or deleted counts from the next write in every process;
// what is compiled is cached by resource version, within a bound on the elements held.
import type { Principal } from '../auth/principal.js';
import type { R4Registry } from '../definitions/registry.js';
import { AppError } from '../errors.js';
import { storedTerminology } from '../fhir/interactions/terminology.js';
import type { ReferenceParser } from '../fhir/references.js';
import type { FhirRequest, ProfileChecker, ProfileCheckOptions } from '../fhir/services.js';
import { RequestFhirPathBudget } from '../request-fhirpath/request-fhirpath.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import type { ResourceStore } from '../storage/store.js';
import { TerminologyEngine } from '../terminology/engine.js';
import type { ValidationIssue } from '../validation/validate.js';
import { compileProfile, elementPathExists, InvariantBudget, type CompiledProfile } from './compile.js';
import { isMember, ProfileWalk, sliceValueSets, type PendingBinding, type ValueSetMembers } from './conformance.js';
import { mergeDifferential, readElements, type ProfileElement } from './elements.js';

/** Profiles one resource may name in meta.profile (and $validate's `profile`) that are checked. */
export const MAX_PROFILES_PER_RESOURCE = 20;
/** Bases a differential may be merged over, its own R4 base not counted. */
const MAX_BASE_DEPTH = 8;
/** Compiled profiles held, counted in elements (each about 800 bytes: its definition and its compiled node). */
const CACHE_ELEMENTS = 25_000;
/** Value sets expanded per resource to tell slices apart. */
const MAX_SLICE_VALUE_SETS = 20;
/** Required bindings checked per resource: each may expand a value set. */
const MAX_BINDINGS_PER_RESOURCE = 200;

/** Profiles the CapabilityStatement lists at most. */
const MAX_LISTED_PROFILES = 1000;

const R4_BASE = 'http://hl7.org/fhir/StructureDefinition/';

/** Reads the stored ValueSets and CodeSystems for required bindings: enforcement is the server's, not the caller's. */
const CONFORMANCE_READER: Principal = {
  accountId: '',
  username: 'ambient-fhir profiles',
  scopes: [],
  canFhir: (action, type) =>
    (action === 'read' || action === 'search') && (type === 'ValueSet' || type === 'CodeSystem'),
  hasScope: () => false,
};

interface ProfileRow {
  pk: number;
  id: string;
  version: string | null;
  resource_version: number;
  last_updated: number;
}

interface Entry {
  key: string;
  profile: CompiledProfile;
  /** The merged elements, for a differential whose base this profile is. */
  elements: readonly ProfileElement[];
  /** The key of each stored base it was merged over: stale once one changes. */
  bases: { url: string; key: string }[];
}

/** Why a profile named could not be used, for $validate's warnings (a write ignores it). */
class Unusable extends Error {}

export class StoredProfiles implements ProfileChecker {
  private readonly cache = new Map<string, Entry>();
  private cachedElements = 0;
  private readonly budget = new InvariantBudget();

  constructor(
    private readonly db: SqlDatabase,
    private readonly store: ResourceStore,
    private readonly registry: R4Registry,
    private readonly references: ReferenceParser,
  ) {}

  async check(
    request: FhirRequest,
    resource: Record<string, unknown>,
    options: ProfileCheckOptions = {},
  ): Promise<ValidationIssue[]> {
    const meta = resource.meta as { profile?: unknown } | undefined;
    const named = Array.isArray(meta?.profile) ? meta.profile.filter((p): p is string => typeof p === 'string') : [];
    const canonicals = [...new Set([...named, ...(options.explicit ?? [])])];
    const type = String(resource.resourceType);
    const issues: ValidationIssue[] = [];
    if (canonicals.length > MAX_PROFILES_PER_RESOURCE) {
      throw new AppError(
        'bad-request',
        `A resource is checked against at most ${MAX_PROFILES_PER_RESOURCE} profiles; it names ${canonicals.length}`,
        { expression: `${type}.meta.profile` },
      );
    }
    // The profiles its types name (extensions, data types, slices, reference targets), found ahead of the walk.
    const nested = new Map<string, CompiledProfile>();
    const used = new Map<string, CompiledProfile>();
    for (const canonical of canonicals) {
      if (canonical === `${R4_BASE}${type}`) continue; // the base validation's
      let profile: CompiledProfile | undefined;
      try {
        profile = await this.resolve(canonical);
      } catch (error) {
        if (!(error instanceof Unusable)) throw error;
        if (options.reportUnknown) issues.push(warning(`${type}.meta.profile`, error.message));
        continue;
      }
      if (profile.type !== type) {
        issues.push(
          error('structure', `${type}.meta.profile`, `profile ${canonical} constrains ${profile.type}, not ${type}`),
        );
        continue;
      }
      await this.loadNested(profile, nested, 0);
      used.set(canonical, profile);
    }
    // Most writes name no profile: nothing to expand or walk.
    if (used.size === 0) return issues;
    const engine = new TerminologyEngine(
      storedTerminology({ services: request.services, principal: CONFORMANCE_READER }),
    );
    const expansions = new Expansions(engine);
    const members = await this.sliceMembers(expansions, [...used.values(), ...nested.values()]);
    const walk = new ProfileWalk(
      this.registry,
      this.references,
      (url) => nested.get(url),
      this.budget,
      new RequestFhirPathBudget(),
      (valueSet) => members.get(valueSet),
    );
    for (const profile of used.values()) walk.check(profile, resource, type);
    // What the profiles named, and those their types name, leave unchecked: each once.
    const unchecked = new Map<string, CompiledProfile>(options.reportUnknown ? [...nested, ...used] : []);
    for (const [canonical, profile] of unchecked) {
      for (const s of profile.skipped) {
        issues.push(
          warning(type, `constraint ${s.key} of ${s.element} (profile ${canonical}) is not checked: ${s.reason}`),
        );
      }
    }
    issues.push(...walk.issues);
    issues.push(...(await this.bindings(expansions, walk.bindings, options.reportUnknown === true)));
    return issues;
  }

  /**
   * The expansions of the value sets that tell slices apart, at most MAX_SLICE_VALUE_SETS per resource;
   * one the engine cannot expand is left out, and its slices are not checked (the walk warns).
   */
  private async sliceMembers(expansions: Expansions, profiles: readonly CompiledProfile[]) {
    const members = new Map<string, ValueSetMembers>();
    const wanted = [...new Set(profiles.flatMap(sliceValueSets))].slice(0, MAX_SLICE_VALUE_SETS);
    for (const url of wanted) {
      const expansion = await expansions.of(url);
      if (typeof expansion !== 'string') members.set(url, expansion);
    }
    return members;
  }

  /** R4's own definition of a type (`.../StructureDefinition/Quantity`): the base validation's rules. */
  private isR4Type(url: string): boolean {
    return url.startsWith(R4_BASE) && this.registry.type(url.slice(R4_BASE.length)) !== undefined;
  }

  checkDefinition(definition: Record<string, unknown>): void {
    if (definition.derivation !== 'constraint') return;
    const type = typeof definition.type === 'string' ? definition.type : '';
    if (!this.registry.type(type)) {
      throw new AppError('profile-invalid', `A profile must constrain an R4 type; ${JSON.stringify(type)} is none`, {
        expression: 'StructureDefinition.type',
      });
    }
    for (const part of ['snapshot', 'differential'] as const) {
      const list = (definition[part] as { element?: unknown } | undefined)?.element;
      if (list === undefined) continue;
      const elements = readElements(list, `StructureDefinition.${part}`, type);
      // A rule on an element the type does not have could never be met by any resource.
      if (part === 'snapshot') continue;
      elements.forEach((element, i) => {
        if (!elementPathExists(this.registry, type, element.path)) {
          throw new AppError('profile-invalid', `${element.path} is not an element of ${type}`, {
            expression: `StructureDefinition.differential.element[${i}].path`,
          });
        }
      });
    }
  }

  async supported(): Promise<{ url: string; version?: string; type: string }[]> {
    const rows = await this.db.query<{ url: string; version: string | null; type: string }>(
      `SELECT url, version, type FROM profile ORDER BY url, version LIMIT ${MAX_LISTED_PROFILES}`,
    );
    return rows.map((r) => ({ url: r.url, ...(r.version !== null ? { version: r.version } : {}), type: r.type }));
  }

  // ---------------------------------------------------------------------------------------------------

  private async loadNested(profile: CompiledProfile, nested: Map<string, CompiledProfile>, depth: number) {
    if (depth >= 4) return;
    for (const url of profile.typeProfiles) {
      if (this.isR4Type(url) || nested.has(url)) continue;
      try {
        const found = await this.resolve(url);
        nested.set(url, found);
        await this.loadNested(found, nested, depth + 1);
      } catch (error) {
        if (!(error instanceof Unusable)) throw error;
      }
    }
  }

  /** The compiled profile a canonical (`url` or `url|version`) names now. */
  private async resolve(canonical: string, depth = 0, seen: string[] = []): Promise<CompiledProfile> {
    return (await this.entry(canonical, depth, seen)).profile;
  }

  private async entry(canonical: string, depth: number, seen: string[]): Promise<Entry> {
    const bar = canonical.indexOf('|');
    const url = bar < 0 ? canonical : canonical.slice(0, bar);
    const version = bar < 0 ? undefined : canonical.slice(bar + 1);
    if (seen.includes(url)) throw new Unusable(`profile ${url} is its own base (${[...seen, url].join(' → ')})`);
    const row = await this.current(url, version);
    if (!row) throw new Unusable(`profile ${canonical} is not known to this server: not checked`);
    const key = `${row.pk}@${row.resource_version}`;
    const cached = this.cache.get(key);
    if (cached && (await this.basesCurrent(cached))) {
      this.cache.delete(key);
      this.cache.set(key, cached);
      return cached;
    }
    const entry = await this.compile(key, row, depth, [...seen, url]);
    this.remember(entry);
    return entry;
  }

  private async current(url: string, version: string | undefined): Promise<ProfileRow | undefined> {
    const rows = await this.db.query<ProfileRow>(
      `SELECT p.pk, p.id, p.version, r.version AS resource_version, r.last_updated
       FROM profile p JOIN resource r ON r.pk = p.pk
       WHERE p.url = ? AND r.deleted = 0
       ORDER BY r.last_updated DESC, p.pk DESC LIMIT 50`,
      [url],
    );
    return version === undefined ? rows[0] : rows.find((r) => r.version === version);
  }

  private async basesCurrent(entry: Entry): Promise<boolean> {
    for (const base of entry.bases) {
      const row = await this.current(base.url, undefined);
      if (!row || `${row.pk}@${row.resource_version}` !== base.key) return false;
    }
    return true;
  }

  private async compile(key: string, row: ProfileRow, depth: number, seen: string[]): Promise<Entry> {
    const stored = await this.store.read('StructureDefinition', row.id);
    if (!stored?.content || stored.deleted) throw new Unusable(`profile ${seen[seen.length - 1]} was just deleted`);
    const sd = JSON.parse(stored.content) as Record<string, unknown>;
    const url = String(sd.url);
    const label = typeof sd.version === 'string' ? `${url}|${sd.version}` : url;
    const type = typeof sd.type === 'string' ? sd.type : '';
    if (!this.registry.type(type))
      throw new Unusable(`profile ${label} constrains ${type}, not an R4 type: not checked`);
    let elements: readonly ProfileElement[];
    const bases: Entry['bases'] = [];
    try {
      const snapshot = sd.snapshot as { element?: unknown } | undefined;
      const differential = sd.differential as { element?: unknown } | undefined;
      if (snapshot?.element !== undefined) {
        elements = readElements(snapshot.element, 'StructureDefinition.snapshot', type);
      } else if (differential?.element !== undefined) {
        const own = readElements(differential.element, 'StructureDefinition.differential', type);
        const baseUrl = typeof sd.baseDefinition === 'string' ? sd.baseDefinition : `${R4_BASE}${type}`;
        if (baseUrl === `${R4_BASE}${type}`) {
          elements = own;
        } else {
          if (depth >= MAX_BASE_DEPTH) throw new Unusable(`profile ${label} has more than ${MAX_BASE_DEPTH} bases`);
          let base: Entry;
          try {
            base = await this.entry(baseUrl, depth + 1, seen);
          } catch (error) {
            if (!(error instanceof Unusable)) throw error;
            throw new Unusable(`the base of profile ${label} cannot be used (${error.message})`);
          }
          if (base.profile.type !== type) {
            throw new Unusable(`profile ${label} constrains ${type} but its base ${baseUrl} ${base.profile.type}`);
          }
          elements = mergeDifferential(base.elements, own);
          bases.push({ url: baseUrl.split('|')[0], key: base.key }, ...base.bases);
        }
      } else {
        throw new Unusable(`profile ${label} has neither a snapshot nor a differential: not checked`);
      }
    } catch (error) {
      if (error instanceof AppError) throw new Unusable(`profile ${label} cannot be read: ${error.message}`);
      throw error;
    }
    const version = typeof sd.version === 'string' ? sd.version : undefined;
    const profile = compileProfile(this.registry, { url, version, type }, elements, this.budget);
    return { key, profile, elements, bases };
  }

  private remember(entry: Entry): void {
    this.cache.set(entry.key, entry);
    this.cachedElements += entry.elements.length;
    for (const [key, old] of this.cache) {
      if (this.cachedElements <= CACHE_ELEMENTS || key === entry.key) break;
      this.cache.delete(key);
      this.cachedElements -= old.elements.length;
    }
  }

  /** The required bindings' codes, decided by the terminology engine; value sets it cannot expand are not checked. */
  private async bindings(
    expansions: Expansions,
    pending: readonly PendingBinding[],
    reportUnchecked: boolean,
  ): Promise<ValidationIssue[]> {
    if (pending.length === 0) return [];
    if (pending.length > MAX_BINDINGS_PER_RESOURCE) {
      throw new AppError(
        'bad-request',
        `A resource may have at most ${MAX_BINDINGS_PER_RESOURCE} codes in required bindings of its profiles`,
      );
    }
    const issues: ValidationIssue[] = [];
    for (const binding of pending) {
      const [label, elementId] = splitElement(binding.element);
      const expansion = await expansions.of(binding.valueSet);
      if (typeof expansion === 'string') {
        if (reportUnchecked) issues.push(warning(binding.expression, `${expansion}: not checked`));
        continue;
      }
      if (!binding.codings.some((coding) => isMember(expansion, coding))) {
        const codes = binding.codings.map((c) => (c.system ? `${c.system}#${c.code}` : c.code)).join(', ');
        issues.push({
          severity: 'error',
          code: 'code-invalid',
          expression: binding.expression,
          diagnostics: `${binding.expression}: ${codes} is not in the required value set ${binding.valueSet} (profile ${label}, element ${elementId})`,
          rule: 'base',
          profile: label,
        });
      }
    }
    return issues;
  }
}

/**
 * The expansions one check uses, each value set expanded once by the terminology engine (over R4's and
 * the stored value sets); a text says why one cannot be.
 */
class Expansions {
  private readonly byUrl = new Map<string, Promise<ValueSetMembers | string>>();

  constructor(private readonly engine: TerminologyEngine) {}

  of(url: string): Promise<ValueSetMembers | string> {
    let found = this.byUrl.get(url);
    if (!found) this.byUrl.set(url, (found = this.expand(url)));
    return found;
  }

  private async expand(url: string): Promise<ValueSetMembers | string> {
    try {
      const vs = await this.engine.findValueSet(url);
      if (!vs) return `value set ${url} is not known to this server`;
      const codes = [...(await this.engine.expandAll(vs)).values()];
      return { keys: new Set(codes.map((c) => `${c.system}|${c.code}`)), codes: new Set(codes.map((c) => c.code)) };
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      return `value set ${url} cannot be expanded here (${error.message})`;
    }
  }
}

function splitElement(element: string): [string, string] {
  const bar = element.lastIndexOf('|');
  return [element.slice(0, bar), element.slice(bar + 1)];
}

function warning(expression: string, message: string): ValidationIssue {
  return { severity: 'warning', code: 'informational', expression, diagnostics: message, rule: 'base' };
}

function error(code: ValidationIssue['code'], expression: string, message: string): ValidationIssue {
  return { severity: 'error', code, expression, diagnostics: `${expression}: ${message}`, rule: 'base' };
}
