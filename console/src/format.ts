// FHIR values as a person reads them in a table cell: a HumanName as "Peter James Chalmers", a
// CodeableConcept by its text or first coding's display, a Quantity with its unit, a Period as a range.
// Decided by the value's shape, so that one formatter serves every element of every type.

const MAX_LIST = 3;
const MAX_TEXT = 80;

type Json = Record<string, any>;

const joined = (parts: unknown[], separator = ' ') =>
  parts
    .filter((p) => p !== undefined && p !== null && p !== '')
    .map(String)
    .join(separator);

function truncate(text: string): string {
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT - 1)}…` : text;
}

function coding(c: Json | undefined): string {
  if (!c) return '';
  return c.display ?? c.code ?? '';
}

function objectText(v: Json): string {
  if ('family' in v || 'given' in v) return v.text ?? joined([...(v.prefix ?? []), ...(v.given ?? []), v.family]);
  if ('coding' in v || ('text' in v && Object.keys(v).length === 1)) {
    return v.text ?? (Array.isArray(v.coding) ? coding(v.coding.find((c: Json) => c.display) ?? v.coding[0]) : '');
  }
  if ('reference' in v || ('display' in v && !('code' in v))) return v.display ?? v.reference ?? '';
  if (typeof v.value === 'number') return joined([v.comparator, v.value, v.unit ?? v.code]);
  if ('start' in v || 'end' in v) return `${v.start ?? '…'} – ${v.end ?? '…'}`;
  if ('low' in v || 'high' in v) return `${v.low ? objectText(v.low) : '…'} – ${v.high ? objectText(v.high) : '…'}`;
  if ('numerator' in v) return `${objectText(v.numerator ?? {})} / ${objectText(v.denominator ?? {})}`;
  if ('code' in v && ('system' in v || 'display' in v)) return coding(v);
  if ('line' in v || 'city' in v || 'postalCode' in v) {
    return v.text ?? joined([...(v.line ?? []), v.city, v.state, v.postalCode, v.country], ', ');
  }
  if (typeof v.value === 'string') return v.value;
  if ('contentType' in v || 'title' in v) return v.title ?? v.contentType;
  if ('identifier' in v) return objectText(v.identifier);
  return JSON.stringify(v);
}

/** The text of any FHIR value (a list shows its first few). */
export function formatValue(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (Array.isArray(value)) {
    const texts = value.map(formatValue).filter(Boolean);
    const more = texts.length > MAX_LIST ? ` (+${texts.length - MAX_LIST})` : '';
    return truncate(texts.slice(0, MAX_LIST).join('; ')) + more;
  }
  if (typeof value === 'object') return truncate(objectText(value as Json));
  return truncate(String(value));
}

/**
 * The value of an element, a choice element (`value[x]`, `effective[x]`) included: `value` finds
 * `valueQuantity`, `valueString`, ...
 */
export function elementValue(resource: Json, name: string): unknown {
  if (name in resource) return resource[name];
  const key = Object.keys(resource).find((k) => k.startsWith(name) && /^[A-Z]/.test(k.slice(name.length)));
  return key === undefined ? undefined : resource[key];
}

/** "birthDate" → "Birth date". */
export function humanise(name: string): string {
  const words = name.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/**
 * `Type/id` of a relative reference (`Patient/1`, `Patient/1/_history/2`): one to this server. Absolute
 * ones may name another server, so they are shown as text.
 */
export function localReference(reference: unknown): { type: string; id: string } | undefined {
  if (typeof reference !== 'string') return undefined;
  const match = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(\/_history\/[A-Za-z0-9\-.]{1,64})?$/.exec(reference);
  return match ? { type: match[1], id: match[2] } : undefined;
}

/** 12345 → "12,345" (one grouping for every reader, as the rest of the console is in English). */
export const formatCount = (n: number): string => n.toLocaleString('en-US');
