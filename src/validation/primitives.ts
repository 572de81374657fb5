/**
 * Checks one JSON primitive against its FHIR type (https://hl7.org/fhir/R4/datatypes.html#primitive and
 * https://hl7.org/fhir/R4/json.html#primitive). The regexes come from the R4 StructureDefinitions via the registry.
 */
import type { PrimitiveTypeRule, R4Registry } from '../definitions/registry.js';

export interface PrimitiveProblem {
  code: 'structure' | 'value';
  severity: 'error' | 'warning';
  message: string;
}

interface CompiledPrimitive {
  rule: PrimitiveTypeRule;
  regex?: RegExp;
}

const INTEGER_TYPES = new Set(['integer', 'positiveInt', 'unsignedInt']);
/** The spec's integer range (32-bit) applies to positiveInt and unsignedInt too. */
const MAX_INT32 = 2147483647;
const MIN_INT32 = -2147483648;
const MAX_STRING_LENGTH = 1024 * 1024;

// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000B\u000C\u000E-\u001F]/;

/**
 * R4 caps strings at 1 MB (datatypes.html#string); base64Binary has no limit in the spec ("systems will
 * have to impose some implementation based limit"): ours is the request body's, AMBIENT_MAX_BODY_BYTES
 * (a Binary's raw content, https://hl7.org/fhir/R4/http.html#binary, is as large as any body may be).
 */
function maxLength(type: string): number {
  return type === 'base64Binary' ? Infinity : MAX_STRING_LENGTH;
}

export class PrimitiveChecker {
  private readonly compiled = new Map<string, CompiledPrimitive>();

  constructor(private readonly registry: R4Registry) {}

  /** Returns the problem with `value` as a `type`, or undefined when it is valid. */
  check(type: string, value: unknown): PrimitiveProblem | undefined {
    const primitive = this.primitive(type);
    if (!primitive) return undefined;
    const { rule } = primitive;
    if (typeof value !== rule.json) {
      return error('structure', `expected a JSON ${rule.json} for FHIR type ${type}, found ${describeJson(value)}`);
    }
    if (rule.json === 'number') return checkNumber(type, value as number);
    if (rule.json === 'string') return this.checkString(type, value as string, primitive);
    return undefined;
  }

  private checkString(type: string, value: string, primitive: CompiledPrimitive): PrimitiveProblem | undefined {
    if (value.length === 0) return error('value', `empty ${type}: a value SHALL NOT be an empty string`);
    if (value.length > (primitive.rule.maxLength ?? maxLength(type))) {
      return error('value', `${type} is longer than the 1 MB the spec allows (${value.length} characters)`);
    }
    // FHIR data must survive XML, where these control characters cannot exist (and PostgreSQL refuses NUL).
    if (CONTROL_CHARACTERS.test(value)) {
      return error('value', `${type} contains a control character (U+0000 to U+001F other than tab, CR, LF)`);
    }
    if (type === 'base64Binary') {
      if (!isBase64(value)) return error('value', `${JSON.stringify(truncate(value))} is not valid base64`);
    } else if (primitive.regex && !primitive.regex.test(value)) {
      return error('value', `${JSON.stringify(truncate(value))} is not a valid ${type}`);
    }
    if (type === 'xhtml' && !/^\s*<div[\s>/]/.test(value)) {
      return error('value', 'narrative XHTML must be a single <div> element');
    }
    if ((type === 'string' || type === 'markdown') && value.trim().length === 0) {
      return { code: 'value', severity: 'warning', message: `${type} SHOULD contain non-whitespace content` };
    }
    return undefined;
  }

  private primitive(type: string): CompiledPrimitive | undefined {
    let compiled = this.compiled.get(type);
    if (!compiled) {
      const rule = this.registry.primitiveType(type);
      if (!rule) return undefined;
      // The spec's regexes match a whole value; JSON numbers are already lexically valid, so only strings use them.
      const regex =
        rule.regex && rule.json === 'string' ? new RegExp(`^(?:${toJavaScriptPattern(rule.regex)})$`) : undefined;
      compiled = { rule, regex };
      this.compiled.set(type, compiled);
    }
    return compiled;
  }
}

/**
 * base64Binary is checked by hand: the spec's regex `(\\s*([0-9a-zA-Z\\+/=]){4}\\s*)+` backtracks exponentially on a
 * long value with line breaks that ends in a bad character. Whitespace is allowed, as in the spec's regex.
 */
export function isBase64(value: string): boolean {
  const compact = value.replace(/[ \t\n\r]+/g, '');
  return compact.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(compact);
}

const XML_SPACE = ' \\t\\n\\r';

/**
 * The spec's regexes use XML Schema semantics, where `\s` is only space, tab, CR and LF. In JavaScript `\s` also
 * matches Unicode spaces, so `[ \r\n\t\S]+` would reject a string holding a no-break space. Rewrite the escapes.
 */
export function toJavaScriptPattern(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === '\\') {
      const next = pattern[++i];
      if (next === 's') out += `[${XML_SPACE}]`;
      else if (next === 'S') out += `[^${XML_SPACE}]`;
      else out += ch + next;
    } else if (ch === '[') {
      const end = classEnd(pattern, i);
      out += characterClass(pattern.slice(i + 1, end));
      i = end;
    } else {
      out += ch;
    }
  }
  return out;
}

function classEnd(pattern: string, start: number): number {
  for (let i = start + 1; i < pattern.length; i++) {
    if (pattern[i] === '\\') i++;
    else if (pattern[i] === ']') return i;
  }
  throw new Error(`unterminated character class in ${pattern}`);
}

/** `[ab\S]` cannot hold a negated class, so it becomes `(?:[ab]|[^ \t\n\r])`. */
function characterClass(body: string): string {
  const negated = body.startsWith('^');
  let members = '';
  let nonSpace = false;
  for (let i = negated ? 1 : 0; i < body.length; i++) {
    if (body[i] === '\\' && body[i + 1] === 's') {
      members += XML_SPACE;
      i++;
    } else if (body[i] === '\\' && body[i + 1] === 'S') {
      nonSpace = true;
      i++;
    } else if (body[i] === '\\') {
      members += body[i] + body[i + 1];
      i++;
    } else {
      members += body[i];
    }
  }
  if (!nonSpace) return `[${negated ? '^' : ''}${members}]`;
  if (negated) throw new Error(`cannot translate negated class with \\S: [${body}]`);
  return `(?:[${members}]|[^${XML_SPACE}])`;
}

function checkNumber(type: string, value: number): PrimitiveProblem | undefined {
  if (!Number.isFinite(value)) return error('value', `${value} is not a valid ${type}`);
  if (!INTEGER_TYPES.has(type)) return undefined;
  if (!Number.isInteger(value)) return error('value', `${value} is not a valid ${type}: expected a whole number`);
  if (value > MAX_INT32 || value < MIN_INT32) {
    return error('value', `${value} is outside the 32-bit range of ${type}`);
  }
  if (type === 'positiveInt' && value < 1) return error('value', `${value} is not a valid positiveInt: must be >= 1`);
  if (type === 'unsignedInt' && value < 0) return error('value', `${value} is not a valid unsignedInt: must be >= 0`);
  return undefined;
}

function error(code: PrimitiveProblem['code'], message: string): PrimitiveProblem {
  return { code, severity: 'error', message };
}

export function describeJson(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function truncate(value: string): string {
  return value.length > 64 ? `${value.slice(0, 61)}...` : value;
}
