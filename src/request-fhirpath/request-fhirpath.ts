// FHIRPath that arrives in a request (the paths of a FHIRPath Patch) runs on @medplum/core's evaluator, but
// under limits, because a client chooses it and it runs on the event loop (and, for a patch, inside the
// write transaction). The defence, and why it holds:
//
// - the expression's size is bounded (length, bracket nesting, depth of the parsed tree), so parsing and
//   the recursion of evaluation are bounded;
// - only functions whose own work is linear in their input run (an allow-list): those that compare every
//   item with every other (`|`, union, distinct, intersect, exclude, subsetOf, ...) are refused, and so are
//   trace (writes logs) and medplum's stubs (repeat, descendants, children: they answer nothing); `~` and
//   `!~`, which sort both sides, take at most 1,000 items a side;
// - `matches` and `replaceMatches` run on re2js, a linear-time engine (./linear-regex.ts), never on
//   JavaScript's backtracking RegExp; `replace` is our own, and checks the size of its result before
//   building it;
// - every evaluation of a node of the tree, every item and code unit it returns, and every regular-
//   expression search (its worst case, (characters searched + 1) x program size, before it runs) is charged
//   to one budget per request, which also carries a deadline checked at each charge. Between two charges
//   the evaluator does at most linear work in the size of the values at hand, so the budget bounds the
//   whole.
import {
  evalFhirPathTyped,
  FunctionAtom,
  parseFhirPath,
  toTypedValue,
  type FhirPathAtom,
  type TypedValue,
} from '@medplum/core';
import { AppError } from '../errors.js';
import { LinearRegex, UnsupportedPattern, type StepBudget } from './linear-regex.js';

export interface RequestFhirPathLimits {
  /** Characters of one expression. */
  readonly maxLength: number;
  /** Nested brackets (parentheses and indexers) in one expression, and twice that for the parsed tree. */
  readonly maxNesting: number;
  /** Steps (node evaluations, items returned, characters x instructions searched) for the whole request. */
  readonly maxSteps: number;
  /** Code units of strings returned, for the whole request: bounds what `replace` and `+` can build. */
  readonly maxChars: number;
  /** Wall-clock time for the whole request. */
  readonly maxMillis: number;
}

export const REQUEST_FHIRPATH_LIMITS: RequestFhirPathLimits = Object.freeze({
  maxLength: 1024,
  maxNesting: 32,
  maxSteps: 20_000_000,
  maxChars: 64 * 1024 * 1024,
  maxMillis: 2000,
});

// Functions whose own work (leaving out the evaluation of their arguments, which is charged) is linear in
// the size of their input and arguments. Everything else is refused with a 400 naming it.
const ALLOWED_FUNCTIONS = new Set([
  'empty',
  'hasValue',
  'exists',
  'all',
  'allTrue',
  'anyTrue',
  'allFalse',
  'anyFalse',
  'count',
  'where',
  'select',
  'ofType',
  'single',
  'first',
  'last',
  'tail',
  'skip',
  'take',
  'combine',
  'iif',
  'toBoolean',
  'convertsToBoolean',
  'toInteger',
  'convertsToInteger',
  'toDate',
  'convertsToDate',
  'toDateTime',
  'convertsToDateTime',
  'toDecimal',
  'convertsToDecimal',
  'toQuantity',
  'convertsToQuantity',
  'toString',
  'convertsToString',
  'toTime',
  'convertsToTime',
  'indexOf',
  'substring',
  'startsWith',
  'endsWith',
  'contains',
  'upper',
  'lower',
  'replace',
  'matches',
  'replaceMatches',
  'length',
  'abs',
  'ceiling',
  'exp',
  'floor',
  'ln',
  'log',
  'power',
  'round',
  'sqrt',
  'truncate',
  'now',
  'timeOfDay',
  'today',
  'is',
  'as',
  'not',
  'resolve',
  'type',
  'extension',
]);

interface AtomLike {
  eval(context: unknown, input: TypedValue[]): TypedValue[];
  [key: string]: unknown;
}

const isAtom = (value: unknown): value is AtomLike =>
  Boolean(value) && typeof value === 'object' && typeof (value as AtomLike).eval === 'function';

/** One request's allowance, shared by all the expressions it evaluates. */
export class RequestFhirPathBudget implements StepBudget {
  private steps = 0;
  private chars = 0;
  private sinceClockCheck = 0;
  private readonly deadline: number;

  constructor(readonly limits: RequestFhirPathLimits = REQUEST_FHIRPATH_LIMITS) {
    this.deadline = performance.now() + limits.maxMillis;
  }

  spend(steps: number): void {
    this.steps += steps;
    this.sinceClockCheck += steps;
    if (this.steps > this.limits.maxSteps) this.exhausted(`more than ${this.limits.maxSteps} steps`);
    // Reading the clock costs more than a step; every 4096 steps is often enough to stop within a few ms.
    if (this.sinceClockCheck >= 4096) {
      this.sinceClockCheck = 0;
      if (performance.now() > this.deadline) this.exhausted(`more than ${this.limits.maxMillis} ms`);
    }
  }

  /** Charges strings a step has built (or returned), before or after building them. */
  spendChars(chars: number): void {
    this.chars += chars;
    if (this.chars > this.limits.maxChars) this.exhausted(`strings of more than ${this.limits.maxChars} characters`);
  }

  private exhausted(what: string): never {
    throw new AppError('fhirpath-too-costly', `Evaluating the request's FHIRPath took ${what}; refused as too costly`);
  }
}

/** Counts nested brackets outside string literals, before parsing, so the parser's recursion stays bounded. */
function bracketNesting(expression: string): number {
  let depth = 0;
  let deepest = 0;
  let quote: string | undefined;
  for (let i = 0; i < expression.length; i++) {
    const c = expression[i];
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = undefined;
    } else if (c === "'" || c === '`' || c === '"') quote = c;
    else if (c === '(' || c === '[' || c === '{') deepest = Math.max(deepest, ++depth);
    else if (c === ')' || c === ']' || c === '}') depth--;
  }
  return deepest;
}

/** A compiled request expression, evaluated against a resource under the request's budget. */
export type RequestFhirPath = (root: unknown) => unknown[];

/**
 * Parses and guards a request's FHIRPath as compileRequestFhirPath does, and answers the guarded tree, for a
 * caller that evaluates it itself (a profile's invariants, with the validator's shortcuts). What a node
 * throws past the budget is an AppError, in the cause chain of the engine's error.
 */
export function guardRequestFhirPath(expression: string, budget: RequestFhirPathBudget): FhirPathAtom {
  const { maxLength, maxNesting } = budget.limits;
  if (expression.length > maxLength) {
    throw new AppError('fhirpath-too-complex', `The FHIRPath expression has more than ${maxLength} characters`);
  }
  if (bracketNesting(expression) > maxNesting) {
    throw new AppError('fhirpath-too-complex', `The FHIRPath expression nests brackets deeper than ${maxNesting}`);
  }
  let tree: AtomLike;
  try {
    tree = parseFhirPath(expression) as unknown as AtomLike;
  } catch (error) {
    throw new AppError('bad-request', `Cannot parse the FHIRPath "${expression}": ${(error as Error).message}`);
  }
  guard(tree, budget, 0, expression);
  return tree as unknown as FhirPathAtom;
}

/**
 * Parses and guards a request's FHIRPath. Throws 400 (`fhirpath-too-complex`, `fhirpath-unsupported`, or
 * `bad-request` for a syntax error) before anything runs; evaluation throws 422 `fhirpath-too-costly` once
 * the budget is spent.
 */
export function compileRequestFhirPath(expression: string, budget: RequestFhirPathBudget): RequestFhirPath {
  const tree = guardRequestFhirPath(expression, budget);
  return (root) => {
    try {
      return evalFhirPathTyped(tree, [toTypedValue(root)]).map((t) => t.value);
    } catch (error) {
      // medplum wraps what a function throws in an Error whose cause it is.
      for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
        if (cause instanceof AppError) throw cause;
      }
      throw new AppError('bad-request', `Cannot evaluate the FHIRPath "${expression}": ${(error as Error).message}`);
    }
  };
}

/** Refuses what is not allowed and wraps every node of the parsed tree so that it charges the budget. */
function guard(atom: AtomLike, budget: RequestFhirPathBudget, depth: number, expression: string): void {
  if (depth > budget.limits.maxNesting * 4) {
    throw new AppError('fhirpath-too-complex', `The FHIRPath expression "${expression}" is nested too deeply`);
  }
  if (atom.operator === '|') {
    throw new AppError('fhirpath-unsupported', 'The FHIRPath union operator "|" is not supported in requests');
  }
  let own: AtomLike['eval'] = atom.eval.bind(atom);
  if (atom instanceof FunctionAtom) {
    if (!ALLOWED_FUNCTIONS.has(atom.name)) {
      throw new AppError('fhirpath-unsupported', `The FHIRPath function ${atom.name}() is not supported in requests`);
    }
    const args = atom.args as unknown as AtomLike[];
    if (atom.name === 'matches') own = (context, input) => matches(context, input, args, budget);
    if (atom.name === 'replaceMatches') own = (context, input) => replaceMatches(context, input, args, budget);
    if (atom.name === 'replace') own = (context, input) => replace(context, input, args, budget);
  }
  for (const value of Object.values(atom)) {
    if (isAtom(value)) guard(value, budget, depth + 1, expression);
    else if (Array.isArray(value))
      for (const item of value) if (isAtom(item)) guard(item, budget, depth + 1, expression);
  }
  // Equivalence sorts both sides (n log n comparisons inside one node): keep the sides small.
  if ((atom.operator === '~' || atom.operator === '!~') && isAtom(atom.left) && isAtom(atom.right)) {
    for (const side of [atom.left, atom.right]) limitItems(side, MAX_EQUIVALENCE_ITEMS, atom.operator);
  }
  atom.eval = (context, input) => {
    budget.spend(1 + input.length);
    const output = own(context, input);
    budget.spend(output.length);
    for (const item of output) if (typeof item.value === 'string') budget.spendChars(item.value.length);
    return output;
  };
}

const MAX_EQUIVALENCE_ITEMS = 1000;

/** Makes a node refuse (422) to return more than `max` items; wrapped before the budget's wrapper. */
function limitItems(atom: AtomLike, max: number, operator: string): void {
  const evaluate = atom.eval.bind(atom);
  atom.eval = (context, input) => {
    const output = evaluate(context, input);
    if (output.length > max) {
      throw new AppError('fhirpath-too-costly', `The FHIRPath "${operator}" compares at most ${max} items a side`);
    }
    return output;
  };
}

/** The single string input and the string values of the arguments, as medplum's string functions take them. */
function stringCall(
  context: unknown,
  input: TypedValue[],
  args: AtomLike[],
): { value: string; args: (string | undefined)[] } | undefined {
  if (input.length === 0) return undefined;
  if (input.length > 1) throw new Error(`Expected a single string, got ${input.length} items`);
  const value = input[0].value;
  if (typeof value !== 'string') throw new Error('String function cannot be called with non-string');
  return {
    value,
    args: args.map((arg) => {
      const result = arg.eval(context, input)[0]?.value;
      return typeof result === 'string' ? result : undefined;
    }),
  };
}

const compiledPatterns = new WeakMap<RequestFhirPathBudget, Map<string, LinearRegex>>();

function compilePattern(pattern: string, budget: RequestFhirPathBudget): LinearRegex {
  let cache = compiledPatterns.get(budget);
  if (!cache) compiledPatterns.set(budget, (cache = new Map()));
  let regex = cache.get(pattern);
  if (!regex) {
    budget.spend(pattern.length);
    try {
      regex = new LinearRegex(pattern);
    } catch (error) {
      if (!(error instanceof UnsupportedPattern)) throw error;
      throw new AppError('fhirpath-unsupported', `The regular expression "${pattern}" is refused: ${error.message}`);
    }
    budget.spend(regex.programSize); // compiling is linear in the program
    cache.set(pattern, regex);
  }
  return regex;
}

function matches(context: unknown, input: TypedValue[], args: AtomLike[], budget: RequestFhirPathBudget) {
  const call = stringCall(context, input, args);
  if (!call || call.args[0] === undefined) return [];
  const regex = compilePattern(call.args[0], budget);
  return [toTypedValue(regex.test(call.value, budget))];
}

function replaceMatches(context: unknown, input: TypedValue[], args: AtomLike[], budget: RequestFhirPathBudget) {
  const call = stringCall(context, input, args);
  if (!call || call.args[0] === undefined || call.args[1] === undefined) return [];
  const { value } = call;
  const regex = compilePattern(call.args[0], budget);
  // FHIRPath names groups as ${name}; JavaScript's replacement syntax, which medplum follows, as $<name>.
  // (re2js's own replaceAll spells them $<name> too, or ${name} and $0 in its Java mode; it is not used
  // because each search must be charged before it runs, so the loop and the expansion are here.)
  const substitution = call.args[1].replaceAll(/\$\{(\w+)\}/g, '$<$1>');
  let out = '';
  let copied = 0;
  let from = 0;
  // Each search is charged for the rest of the string (re2js may scan to its end even when it matches
  // early), so k matches in n characters cost up to k x n x program size: many matches in a long string
  // can be refused as too costly.
  while (from <= value.length) {
    const match = regex.exec(value, from, budget);
    if (!match) break;
    const piece = value.slice(copied, match[0]) + expand(substitution, match, value, regex);
    budget.spendChars(piece.length);
    out += piece;
    copied = match[1];
    // An empty match moves on by one code unit, as String.prototype.replace does with /g.
    from = match[1] === match[0] ? match[1] + 1 : match[1];
  }
  budget.spendChars(value.length - copied);
  return [toTypedValue(out + value.slice(copied))];
}

/** JavaScript's replacement patterns: $$, $&, $`, $', $n, $nn and $<name>. */
function expand(template: string, match: number[], input: string, regex: LinearRegex): string {
  const group = (n: number) => (match[n * 2] >= 0 ? input.slice(match[n * 2], match[n * 2 + 1]) : '');
  return template.replace(/\$(\$|&|`|'|\d{1,2}|<([^>]*)>)/g, (whole, token: string, name: string | undefined) => {
    if (token === '$') return '$';
    if (token === '&') return group(0);
    if (token === '`') return input.slice(0, match[0]);
    if (token === "'") return input.slice(match[1]);
    if (name !== undefined) {
      if (regex.groupNames.size === 0) return whole;
      const index = regex.groupNames.get(name);
      return index === undefined ? '' : group(index);
    }
    const two = Number(token);
    if (token.length === 2 && two >= 1 && two <= regex.groupCount) return group(two);
    const one = Number(token[0]);
    if (one >= 1 && one <= regex.groupCount) return group(one) + token.slice(1);
    return whole;
  });
}

/** FHIRPath replace(): literal, every occurrence; an empty pattern surrounds every character. */
function replace(context: unknown, input: TypedValue[], args: AtomLike[], budget: RequestFhirPathBudget) {
  const call = stringCall(context, input, args);
  if (!call || call.args[0] === undefined || call.args[1] === undefined) return [];
  const { value } = call;
  const [pattern, substitution] = call.args as [string, string];
  if (value === '') return [toTypedValue(pattern === '' ? substitution : '')];
  budget.spend(value.length);
  const pieces = pattern === '' ? [...value] : value.split(pattern);
  const gaps = pattern === '' ? pieces.length + 1 : pieces.length - 1;
  // Charged before the string is built: `x.replace('', x)` squares the length.
  budget.spendChars(value.length + gaps * substitution.length);
  return [
    toTypedValue(pattern === '' ? substitution + pieces.join(substitution) + substitution : pieces.join(substitution)),
  ];
}
