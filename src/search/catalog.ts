// The search parameters the engine serves, per resource type: every R4 SearchParameter from the
// registry with its FHIRPath expression compiled once (on first use of the type), its handler (one
// module per parameter type, params/*.ts) and its `sp` id, plus the specification's Encounter `_length`.
//
// `sp` is a 48-bit hash of `ResourceType.code`: index rows carry it instead of the type and code, so
// every index key is short and starts with the parameter (one B-tree range per search), and it is stable
// across processes and releases without a lookup table. catalog.test.ts checks there are no collisions.
import { createHash } from 'node:crypto';
import type { R4Registry, SearchParameterDefinition, SearchParameterType } from '../definitions/registry.js';
import type { CapabilitySearchParam } from '../fhir/services.js';
import { tooManyIndexRows } from '../storage/index-limits.js';
import { FhirPathCompiler, TypeModel } from './expressions/evaluate.js';
import type { CompiledPath, Node } from './expressions/evaluate.js';
import { dateParam } from './params/date.js';
import { numberParam } from './params/number.js';
import { positionParam } from './params/position.js';
import type { ExtractContext, ParamTypeHandler } from './params/param-type.js';
import { quantityParam } from './params/quantity.js';
import { referenceParam } from './params/reference.js';
import { stringParam } from './params/string.js';
import { tokenParam } from './params/token.js';
import { uriParam } from './params/uri.js';
import { RowLimitExceeded, RowSink } from './tables.js';
import { parseDateRange } from './values/dates.js';
import type { ReferenceParser } from '../fhir/references.js';
import { canonicalUnit, UCUM_SYSTEM } from './values/ucum.js';

export const HANDLERS: Partial<Record<SearchParameterType, ParamTypeHandler>> = {
  string: stringParam,
  token: tokenParam,
  date: dateParam,
  number: numberParam,
  quantity: quantityParam,
  reference: referenceParam,
  uri: uriParam,
  // R4's one special parameter is Location `near`.
  special: positionParam,
};

/** The 48-bit id of a parameter (or of a derived row set: `code:of-type`, composite `code$0`). */
export function spId(resourceType: string, code: string): number {
  return createHash('sha1').update(`${resourceType}.${code}`).digest().readUIntBE(0, 6);
}

export interface CompositeComponent {
  readonly code: string;
  readonly handler: ParamTypeHandler;
  readonly sp: number;
  readonly extraSp: number;
  readonly path: CompiledPath;
}

/**
 * How a parameter is answered: from the index tables, from the resource table (`_id`, `_lastUpdated`),
 * or not at all (`_text`, `_content`, `_query`: reported as unsupported).
 */
export type ParamKind = 'index' | 'composite' | 'id' | 'lastUpdated' | 'unsupported';

export interface CatalogParam {
  readonly resourceType: string;
  readonly code: string;
  readonly type: SearchParameterType;
  readonly kind: ParamKind;
  readonly sp: number;
  readonly extraSp: number;
  readonly handler?: ParamTypeHandler;
  readonly targets: readonly string[];
  readonly definition?: SearchParameterDefinition;
  readonly documentation?: string;
  /** For index parameters: the values to index (compiled FHIRPath, or the specification's `_length`). */
  readonly extract?: (root: Node, ctx: ExtractContext) => readonly Node[];
  readonly components?: readonly CompositeComponent[];
}

export interface TypeCatalog {
  readonly resourceType: string;
  readonly params: ReadonlyMap<string, CatalogParam>;
  /** The parameters that write index rows, in a fixed order. */
  readonly indexed: readonly CatalogParam[];
}

/**
 * Component types that differ from the R4 definitions, which are wrong there: DocumentReference's
 * `relationship` points its `code` component at `relatesto` (a reference parameter) and its `target`
 * component at `relation` (a token parameter), the wrong way round.
 */
const COMPONENT_TYPE_FIXES: Record<string, readonly SearchParameterType[]> = {
  'DocumentReference.relationship': ['token', 'reference'],
};

/**
 * Parameters this server does not answer (reported as unsupported; 400 with handling=strict): full text
 * (the specification: not used), and `phonetic`, whose sound-alike matching would be fuzzy matching (the specification:
 * unsupported); indexing it as plain names would only cost writes.
 */
const UNSUPPORTED_CODES = new Set([
  '_text',
  '_content',
  '_query',
  '_filter',
  '_containedType',
  '_contained',
  'phonetic',
]);

export class SearchCatalog {
  readonly model: TypeModel;
  readonly compiler: FhirPathCompiler;
  private readonly types = new Map<string, TypeCatalog>();
  /** Expressions the FHIRPath subset could not compile (none in R4; reported by tests and logs). */
  readonly skipped: { resourceType: string; code: string; reason: string }[] = [];

  constructor(
    readonly registry: R4Registry,
    readonly references: ReferenceParser,
  ) {
    this.model = new TypeModel(registry);
    this.compiler = new FhirPathCompiler(this.model);
  }

  forType(resourceType: string): TypeCatalog {
    let catalog = this.types.get(resourceType);
    if (!catalog) {
      catalog = this.build(resourceType);
      this.types.set(resourceType, catalog);
    }
    return catalog;
  }

  param(resourceType: string, code: string): CatalogParam | undefined {
    return this.forType(resourceType).params.get(code);
  }

  /**
   * The index rows of one resource; more than `limit` rows throws `too-many-index-rows` (see
   * storage/index-limits.ts), naming the parameter that crossed it.
   */
  extract(resource: Record<string, unknown> & { resourceType: string }, limit?: number): RowSink {
    const catalog = this.forType(resource.resourceType);
    const sink = new RowSink(limit);
    const root = this.compiler.resourceNode(resource);
    const ctx: ExtractContext = {
      sink,
      references: this.references,
      resource,
      stateOf: (type) => this.model.stateOf(type),
      model: this.model,
    };
    for (const param of catalog.indexed) {
      const nodes = param.extract!(root, ctx);
      if (nodes.length === 0) continue;
      try {
        extractParam(param, nodes, ctx, root);
      } catch (error) {
        if (!(error instanceof RowLimitExceeded)) throw error;
        const values = nodes.length.toLocaleString('en-US');
        const what = `search index rows (reached while indexing '${param.code}', which has ${values} values)`;
        throw tooManyIndexRows(resource.resourceType, what, limit);
      }
    }
    return sink;
  }

  capabilities(resourceType: string): CapabilitySearchParam[] {
    return [...this.forType(resourceType).params.values()]
      .filter((p) => p.kind !== 'unsupported')
      .map((p) => ({
        name: p.code,
        type: p.type,
        ...(p.definition?.url ? { definition: p.definition.url } : {}),
        ...(p.documentation ? { documentation: p.documentation } : {}),
      }));
  }

  /**
   * The `_include` values a search of `resourceType` accepts (search/plan.ts planInclude): `*`, and
   * `Type:param` for each of its reference parameters.
   */
  includes(resourceType: string): string[] {
    return ['*', ...this.referenceParams(resourceType).map((p) => `${resourceType}:${p.code}`)];
  }

  /**
   * The `_revinclude` values that bring in resources pointing at `resourceType`: `Source:param` for
   * every reference parameter of any type that may refer to it (a parameter without declared targets
   * may refer to any type).
   */
  revIncludes(resourceType: string): string[] {
    if (!this.revIncludesByTarget) {
      const byTarget = new Map<string, string[]>();
      const all: string[] = [];
      for (const source of this.registry.resourceTypes) {
        for (const param of this.referenceParams(source)) {
          const value = `${source}:${param.code}`;
          if (param.targets.length === 0) all.push(value);
          for (const target of param.targets) byTarget.set(target, [...(byTarget.get(target) ?? []), value]);
        }
      }
      this.revIncludesByTarget = { byTarget, all };
    }
    const { byTarget, all } = this.revIncludesByTarget;
    return [...(byTarget.get(resourceType) ?? []), ...all].sort();
  }

  /**
   * The parameters a system search (`GET /fhir?...`, no type) accepts: those every resource type has
   * (search/plan.ts paramsFor asks each searched type for the parameter).
   */
  systemCapabilities(): CapabilitySearchParam[] {
    const [first, ...rest] = this.registry.resourceTypes;
    if (first === undefined) return [];
    return this.capabilities(first).filter((p) =>
      rest.every((type) => {
        const param = this.param(type, p.name);
        return param !== undefined && param.kind !== 'unsupported';
      }),
    );
  }

  private revIncludesByTarget?: { byTarget: Map<string, string[]>; all: string[] };

  private referenceParams(resourceType: string): CatalogParam[] {
    return [...this.forType(resourceType).params.values()].filter((p) => p.type === 'reference' && p.kind === 'index');
  }

  private build(resourceType: string): TypeCatalog {
    const params = new Map<string, CatalogParam>();
    const indexed: CatalogParam[] = [];
    for (const definition of this.registry.searchParameters(resourceType)) {
      const param = this.buildParam(resourceType, definition);
      params.set(param.code, param);
      if (param.kind === 'index' || param.kind === 'composite') indexed.push(param);
    }
    if (resourceType === 'Encounter') {
      const length = encounterLengthParam(this);
      params.set(length.code, length);
      indexed.push(length);
    }
    return { resourceType, params, indexed };
  }

  private buildParam(resourceType: string, definition: SearchParameterDefinition): CatalogParam {
    const base = {
      resourceType,
      code: definition.code,
      type: definition.type,
      sp: spId(resourceType, definition.code),
      extraSp: spId(resourceType, `${definition.code}:extra`),
      targets: definition.targets ?? [],
      definition,
    };
    if (definition.code === '_id') return { ...base, kind: 'id' };
    if (definition.code === '_lastUpdated') return { ...base, kind: 'lastUpdated' };
    const handler = HANDLERS[definition.type];
    if (
      UNSUPPORTED_CODES.has(definition.code) ||
      !definition.expression ||
      (!handler && definition.type !== 'composite')
    ) {
      return { ...base, kind: 'unsupported' };
    }
    let path: CompiledPath;
    try {
      path = this.compiler.compile(definition.expression, resourceType);
    } catch (error) {
      this.skipped.push({ resourceType, code: definition.code, reason: (error as Error).message });
      return { ...base, kind: 'unsupported' };
    }
    const extract = (root: Node): Node[] => path.evaluate([root], { root });
    if (definition.type !== 'composite') return { ...base, kind: 'index', handler, extract };

    const components: CompositeComponent[] = [];
    for (const [i, component] of (definition.components ?? []).entries()) {
      const componentDefinition = this.registry.searchParameter(resourceType, component.code);
      const fixedType = COMPONENT_TYPE_FIXES[`${resourceType}.${definition.code}`]?.[i];
      const componentType = fixedType ?? componentDefinition?.type;
      const componentHandler = componentType ? HANDLERS[componentType] : undefined;
      if (!componentHandler) {
        this.skipped.push({ resourceType, code: definition.code, reason: `component ${component.code} is unknown` });
        return { ...base, kind: 'unsupported' };
      }
      try {
        components.push({
          code: component.code,
          handler: componentHandler,
          sp: spId(resourceType, `${definition.code}$${i}`),
          extraSp: spId(resourceType, `${definition.code}$${i}:extra`),
          path: this.compiler.compile(component.expression),
        });
      } catch (error) {
        this.skipped.push({ resourceType, code: definition.code, reason: (error as Error).message });
        return { ...base, kind: 'unsupported' };
      }
    }
    return { ...base, kind: 'composite', extract, components };
  }
}

function extractParam(param: CatalogParam, nodes: readonly Node[], ctx: ExtractContext, root: Node): void {
  if (param.kind !== 'composite') {
    param.handler!.extract(nodes, param, 0, ctx);
    return;
  }
  const evalCtx = { root };
  const components = param.components!;
  nodes.forEach((node, i) => {
    const values = components.map((component) => component.path.evaluate([node], evalCtx));
    // The components match only together, joined on the element's grp (also for :missing): an element
    // without a value for one of them can never match, so its rows are not written. (Observation's
    // code-value-concept, -date, -quantity and -string each wrote every code again: a tenth of the rows.)
    if (values.some((v) => v.length === 0)) return;
    components.forEach((component, c) => component.handler.extract(values[c], component, i + 1, ctx));
  });
}

const DAY_MS = 86_400_000;

/**
 * the specification's Encounter `_length`: the encounter's duration in days, from `Encounter.length` (converted
 * from any UCUM time unit) or, where that is absent, from a `period` with both a start and an end.
 */
function encounterLengthParam(catalog: SearchCatalog): CatalogParam {
  const decimal = catalog.model.stateOf('decimal');
  return {
    resourceType: 'Encounter',
    code: '_length',
    type: 'number',
    kind: 'index',
    sp: spId('Encounter', '_length'),
    extraSp: spId('Encounter', '_length:extra'),
    handler: numberParam,
    targets: [],
    documentation:
      'Duration of the encounter in days: Encounter.length converted to days, else the period (start to end).',
    extract(root: Node): Node[] {
      const encounter = root.value as {
        length?: { value?: unknown; code?: unknown; system?: unknown; unit?: unknown };
        period?: { start?: unknown; end?: unknown };
      };
      const length = encounter.length;
      if (length && typeof length.value === 'number') {
        const code =
          typeof length.code === 'string' ? length.code : typeof length.unit === 'string' ? length.unit : 'd';
        const unit = length.system === undefined || length.system === UCUM_SYSTEM ? canonicalUnit(code) : undefined;
        if (unit && unit.code === 's') return [{ value: (length.value * unit.factor) / 86_400, state: decimal }];
      }
      const period = encounter.period;
      if (period && typeof period.start === 'string' && typeof period.end === 'string') {
        const start = parseDateRange(period.start);
        const end = parseDateRange(period.end);
        if (start && end && end.lo >= start.lo) return [{ value: (end.lo - start.lo) / DAY_MS, state: decimal }];
      }
      return [];
    },
  };
}
