// Compiles a FHIRPath expression (the subset parser.ts reads) into a closure over typed nodes. Each
// expression is parsed and compiled once; evaluating it is then plain property access, with the FHIR
// type of every result known from the registry (see model.ts), which is what index extraction needs.
import { parseFhirPathSubset } from './parser.js';
import type { Expr } from './parser.js';
import { TypeModel } from './model.js';
import type { TypeState } from './model.js';
import { RELATIVE_REFERENCE } from '../../fhir/ids.js';

export interface Node {
  readonly value: unknown;
  readonly state: TypeState;
}

export interface EvalContext {
  /** The resource the expression runs on (%resource). */
  readonly root: Node;
}

export type Evaluator = (input: readonly Node[], ctx: EvalContext) => Node[];

/**
 * What a branch that can never match yields, shared: evaluators never change the arrays they are given
 * or return (frozen, so one that tried would throw).
 */
const NOTHING = Object.freeze([]) as unknown as Node[];
const nothing: Evaluator = () => NOTHING;

/** A compiled expression: run it on a resource, or on nodes (composite components). */
export interface CompiledPath {
  readonly source: string;
  evaluate(input: readonly Node[], ctx: EvalContext): Node[];
}

const VARIABLES: Record<string, string> = {
  ucum: 'http://unitsofmeasure.org',
  sct: 'http://snomed.info/sct',
  loinc: 'http://loinc.org',
};

function isTrue(nodes: readonly Node[]): boolean {
  return nodes.length === 1 && nodes[0].value === true;
}

const RESOURCE_URL = new RegExp(`(?:^|/)${RELATIVE_REFERENCE}$`);

/** The resource type a Reference points to, as `resolve()` would find it, without fetching anything. */
export function referencedType(reference: unknown, root: unknown, model: TypeModel): string | undefined {
  if (!reference || typeof reference !== 'object') return undefined;
  const { reference: ref, type } = reference as { reference?: unknown; type?: unknown };
  if (typeof ref === 'string') {
    if (ref.startsWith('#')) {
      const contained = (root as { contained?: { id?: string; resourceType?: string }[] }).contained;
      const found = Array.isArray(contained) ? contained.find((c) => c && c.id === ref.slice(1)) : undefined;
      return found?.resourceType;
    }
    // A conditional reference (`Practitioner?identifier=...`) names its type too.
    const conditional = /^([A-Z][A-Za-z]+)\?/.exec(ref);
    const match = conditional ?? RESOURCE_URL.exec(ref);
    if (match && model.registry.isResourceType(match[1])) return match[1];
  }
  return typeof type === 'string' && model.registry.isResourceType(type) ? type : undefined;
}

export class FhirPathCompiler {
  constructor(readonly model: TypeModel) {}

  /**
   * Throws SyntaxError for expressions outside the supported subset. With `rootType`, the expression only
   * ever runs on resources of that type: its branches for other types (`Condition.code | Observation.code`,
   * as R4's shared SearchParameters have them) are left out when it is compiled, instead of being filtered
   * away on every resource indexed (a fifth of what an import allocated).
   */
  compile(source: string, rootType?: string): CompiledPath {
    const evaluator = this.compileExpr(parseFhirPathSubset(source), rootType);
    return { source, evaluate: evaluator };
  }

  /** The node for a whole resource. */
  resourceNode(resource: { resourceType: string }): Node {
    return { value: resource, state: this.model.stateOf(resource.resourceType) };
  }

  private literal(value: string | number | boolean): Node {
    const type = typeof value === 'string' ? 'string' : typeof value === 'number' ? 'decimal' : 'boolean';
    return { value, state: this.model.stateOf(type) };
  }

  private bool(value: boolean): Node[] {
    return [this.literal(value)];
  }

  private navigate(input: readonly Node[], name: string): Node[] {
    const out: Node[] = [];
    for (const node of input) {
      const value = node.value;
      if (!value || typeof value !== 'object' || Array.isArray(value)) continue;
      for (const step of this.model.steps(node.state, name)) {
        const child = (value as Record<string, unknown>)[step.key];
        if (child === undefined || child === null) continue;
        if (Array.isArray(child)) {
          for (const item of child) if (item !== null && item !== undefined) out.push(this.node(item, step.state));
        } else out.push(this.node(child, step.state));
      }
    }
    return out;
  }

  private node(value: unknown, state: TypeState | undefined): Node {
    if (state) return { value, state };
    const type = (value as { resourceType?: unknown }).resourceType;
    return { value, state: this.model.stateOf(typeof type === 'string' ? type : 'Resource') };
  }

  /** `rootType`: the type of the resource the expression's input is, where that input is the root resource. */
  private compileExpr(expr: Expr, rootType?: string): Evaluator {
    switch (expr.kind) {
      case 'literal': {
        const node = this.literal(expr.value);
        return () => [node];
      }
      case 'variable': {
        if (['resource', 'rootResource', 'context'].includes(expr.name)) return (_input, ctx) => [ctx.root];
        const value = VARIABLES[expr.name];
        if (value === undefined) throw new SyntaxError(`Unknown variable %${expr.name}`);
        const node = this.literal(value);
        return () => [node];
      }
      case 'identifier': {
        const name = expr.name;
        // A leading type name (Patient.name) selects the input nodes of that type; anything else is an element.
        if (/^[A-Z]/.test(name)) {
          if (rootType !== undefined) return this.model.isA(rootType, name) ? (input) => input as Node[] : nothing;
          return (input) => input.filter((n) => this.model.isA(n.state.fhirType, name));
        }
        return (input) => this.navigate(input, name);
      }
      case 'member': {
        const target = this.compileExpr(expr.target, rootType);
        if (target === nothing) return nothing;
        const name = expr.name;
        return (input, ctx) => this.navigate(target(input, ctx), name);
      }
      case 'index': {
        const target = this.compileExpr(expr.target, rootType);
        if (target === nothing) return nothing;
        const index = expr.index;
        return (input, ctx) => {
          const nodes = target(input, ctx);
          return index < nodes.length ? [nodes[index]] : [];
        };
      }
      case 'type': {
        const target = this.compileExpr(expr.target, rootType);
        const typeName = expr.typeName;
        if (expr.op === 'as') {
          if (target === nothing) return nothing;
          return (input, ctx) => target(input, ctx).filter((n) => this.model.isA(n.state.fhirType, typeName));
        }
        return (input, ctx) => {
          const nodes = target(input, ctx);
          return nodes.length === 1 ? this.bool(this.model.isA(nodes[0].state.fhirType, typeName)) : [];
        };
      }
      case 'binary':
        return this.compileBinary(
          expr.op,
          this.compileExpr(expr.left, rootType),
          this.compileExpr(expr.right, rootType),
        );
      case 'call':
        return this.compileCall(expr, rootType);
    }
  }

  private compileBinary(op: string, left: Evaluator, right: Evaluator): Evaluator {
    switch (op) {
      case '|':
        // FHIRPath union: without duplicates (by value), also within one side.
        if (left === nothing && right === nothing) return nothing;
        if (left === nothing) return (input, ctx) => distinctByValue(right(input, ctx));
        if (right === nothing) return (input, ctx) => distinctByValue(left(input, ctx));
        return (input, ctx) => distinctByValue(left(input, ctx).concat(right(input, ctx)));
      case '=':
      case '!=': {
        const negate = op === '!=';
        return (input, ctx) => {
          const a = left(input, ctx);
          const b = right(input, ctx);
          if (a.length === 0 || b.length === 0) return [];
          const equal = a.length === b.length && a.every((n, i) => deepEqual(n.value, b[i].value));
          return this.bool(negate ? !equal : equal);
        };
      }
      case 'and':
      case 'or': {
        const isAnd = op === 'and';
        return (input, ctx) => {
          const a = toBoolean(left(input, ctx));
          const b = toBoolean(right(input, ctx));
          if (isAnd) {
            if (a === false || b === false) return this.bool(false);
            if (a === undefined || b === undefined) return [];
            return this.bool(true);
          }
          if (a === true || b === true) return this.bool(true);
          if (a === undefined || b === undefined) return [];
          return this.bool(false);
        };
      }
      default:
        throw new SyntaxError(`Unsupported operator ${op}`);
    }
  }

  private compileCall(expr: Extract<Expr, { kind: 'call' }>, rootType: string | undefined): Evaluator {
    const target: Evaluator = expr.target ? this.compileExpr(expr.target, rootType) : (input) => [...input];
    const evaluator = this.compileCallOn(expr, target);
    // A call that selects from its target selects nothing from nothing (exists(), empty(), not() still answer).
    return target === nothing && SELECTING_FUNCTIONS.has(expr.name) ? nothing : evaluator;
  }

  private compileCallOn(expr: Extract<Expr, { kind: 'call' }>, target: Evaluator): Evaluator {
    const typeArg = (): string => {
      const arg = expr.args[0];
      if (expr.args.length !== 1 || arg.kind !== 'identifier') throw new SyntaxError(`${expr.name}() takes a type`);
      return arg.name;
    };
    switch (expr.name) {
      case 'where': {
        if (expr.args.length !== 1) throw new SyntaxError('where() takes one argument');
        const criterion = this.compileExpr(expr.args[0]);
        return (input, ctx) => target(input, ctx).filter((n) => isTrue(criterion([n], ctx)));
      }
      case 'exists':
        if (expr.args.length === 0) return (input, ctx) => this.bool(target(input, ctx).length > 0);
        break;
      case 'empty':
        return (input, ctx) => this.bool(target(input, ctx).length === 0);
      case 'not':
        return (input, ctx) => {
          const value = toBoolean(target(input, ctx));
          return value === undefined ? [] : this.bool(!value);
        };
      case 'first':
        return (input, ctx) => target(input, ctx).slice(0, 1);
      case 'as':
      case 'ofType': {
        const typeName = typeArg();
        return (input, ctx) => target(input, ctx).filter((n) => this.model.isA(n.state.fhirType, typeName));
      }
      case 'is': {
        const typeName = typeArg();
        return (input, ctx) => {
          const nodes = target(input, ctx);
          return nodes.length === 1 ? this.bool(this.model.isA(nodes[0].state.fhirType, typeName)) : [];
        };
      }
      case 'resolve':
        // Stands for the referenced resource: only its type is known here, which is all `resolve() is X` needs.
        return (input, ctx) => {
          const out: Node[] = [];
          for (const node of target(input, ctx)) {
            const type = referencedType(node.value, ctx.root.value, this.model);
            if (type) out.push({ value: node.value, state: this.model.stateOf(type) });
          }
          return out;
        };
    }
    throw new SyntaxError(`Unsupported function ${expr.name}()`);
  }
}

/** Functions whose result is taken from their target's nodes. */
const SELECTING_FUNCTIONS = new Set(['where', 'first', 'as', 'ofType', 'resolve']);

function toBoolean(nodes: readonly Node[]): boolean | undefined {
  if (nodes.length === 0) return undefined;
  if (nodes.length === 1 && typeof nodes[0].value === 'boolean') return nodes[0].value;
  return true;
}

/** Up to this many values (or objects among more), a union compares them pairwise instead of by key. */
const FEW_OBJECTS = 8;

/**
 * The nodes without later duplicates by value (as `deepEqual` compares), in one pass: a union can hold the
 * hundreds of thousands of codes of one ValueSet, where comparing each with every kept node took minutes.
 * A union of a few objects (a search parameter's `code | component.code`, on every resource indexed)
 * compares them directly: a canonical text of each was 4% of an import's main thread.
 */
function distinctByValue(nodes: Node[]): Node[] {
  if (nodes.length <= 1) return nodes;
  if (nodes.length <= FEW_OBJECTS) {
    // Few values of any kind: compared pairwise, without a Set.
    const kept: Node[] = [];
    for (const node of nodes) if (!kept.some((other) => deepEqual(other.value, node.value))) kept.push(node);
    return kept;
  }
  let objectCount = 0;
  for (const node of nodes) if (isObjectLike(node.value)) objectCount++;
  const primitives = new Set<unknown>();
  if (objectCount <= FEW_OBJECTS) {
    const kept: Node[] = [];
    for (const node of nodes) {
      if (!isObjectLike(node.value)) {
        if (primitives.has(node.value)) continue;
        primitives.add(node.value);
      } else if (kept.some((other) => isObjectLike(other.value) && deepEqual(other.value, node.value))) continue;
      kept.push(node);
    }
    return kept;
  }
  const objects = new Set<string>();
  return nodes.filter((node) => {
    const seen = isObjectLike(node.value) ? objects : primitives;
    const key = isObjectLike(node.value) ? canonicalJson(node.value) : node.value;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function isObjectLike(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

/** A text equal for exactly the values `deepEqual` finds equal: members in name order, arrays marked as such. */
function canonicalJson(value: unknown): string {
  if (!isObjectLike(value)) return value === undefined ? 'u' : `v${JSON.stringify(value)}`;
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const members = Object.keys(value)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${members.join(',')}}`;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

export { TypeModel };
