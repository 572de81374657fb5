// minValue[x] and maxValue[x] of a profile's element (https://hl7.org/fhir/R4/elementdefinition-definitions.html#ElementDefinition.minValue_x_):
// whether a value is below the least or above the greatest allowed. Numbers compare as numbers; dates,
// dateTimes and instants as the spans of time they name (a value is out of bounds only when all of its
// span is: `2024` is not below a minimum of 2024-06-01); times of day as text (hh:mm:ss); Quantities in
// UCUM by their canonical value when their units are commensurable, otherwise only in the same unit.
// A value that cannot be compared with the bound (another type, units that do not convert) is not refused.
import { canonicalUnit, toCanonicalValue, UCUM_SYSTEM } from '../search/values/ucum.js';

type Side = 'min' | 'max';

/** True when `value` is outside the bound `bound` (the element's `minValue[x]` or `maxValue[x]`, by its name). */
export function outOfBound(value: unknown, bound: { name: string; value: unknown }, side: Side): boolean {
  const type = bound.name.slice('minValue'.length);
  switch (type) {
    case 'Integer':
    case 'Decimal':
    case 'PositiveInt':
    case 'UnsignedInt':
      return typeof value === 'number' && typeof bound.value === 'number' && beyond(value, bound.value, side);
    case 'Date':
    case 'DateTime':
    case 'Instant': {
      const span = typeof value === 'string' ? spanOf(value) : undefined;
      const limit = typeof bound.value === 'string' ? spanOf(bound.value) : undefined;
      if (!span || !limit) return false;
      return side === 'min' ? span.last < limit.first : span.first > limit.last;
    }
    case 'Time':
      return typeof value === 'string' && typeof bound.value === 'string' && beyond(value, bound.value, side);
    case 'Quantity':
      return quantityBeyond(value, bound.value, side);
    default:
      return false;
  }
}

function beyond<T extends number | string>(value: T, limit: T, side: Side): boolean {
  return side === 'min' ? value < limit : value > limit;
}

interface QuantityLike {
  value?: unknown;
  system?: unknown;
  code?: unknown;
}

function quantityBeyond(value: unknown, limit: unknown, side: Side): boolean {
  if (!isQuantity(value) || !isQuantity(limit)) return false;
  if (typeof value.value !== 'number' || typeof limit.value !== 'number') return false;
  if (value.system === UCUM_SYSTEM && limit.system === UCUM_SYSTEM) {
    const from = typeof value.code === 'string' ? canonicalUnit(value.code) : undefined;
    const to = typeof limit.code === 'string' ? canonicalUnit(limit.code) : undefined;
    if (from && to && from.code === to.code) {
      return beyond(toCanonicalValue(value.value, from), toCanonicalValue(limit.value, to), side);
    }
  }
  if (value.system !== limit.system || value.code !== limit.code) return false;
  return beyond(value.value, limit.value, side);
}

function isQuantity(value: unknown): value is QuantityLike {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const DATE_TIME = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/;

/**
 * The first and last millisecond a date, dateTime or instant names (UTC; a time without zone is read as
 * UTC); undefined for text that is none.
 */
export function spanOf(text: string): { first: number; last: number } | undefined {
  const m = DATE_TIME.exec(text);
  if (!m) return undefined;
  const [, year, month, day, hour, minute, second, fraction, zone] = m;
  const y = Number(year);
  const offset =
    zone && zone !== 'Z' ? (zone[0] === '-' ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4))) : 0;
  const utc = (mo: number, d: number, h: number, mi: number, s: number, ms: number) =>
    Date.UTC(y, mo, d, h, mi, s, ms) - offset * 60_000;
  if (month === undefined) return { first: utc(0, 1, 0, 0, 0, 0), last: utc(12, 1, 0, 0, 0, 0) - 1 };
  const mo = Number(month) - 1;
  if (day === undefined) return { first: utc(mo, 1, 0, 0, 0, 0), last: utc(mo + 1, 1, 0, 0, 0, 0) - 1 };
  const d = Number(day);
  if (hour === undefined) return { first: utc(mo, d, 0, 0, 0, 0), last: utc(mo, d + 1, 0, 0, 0, 0) - 1 };
  const h = Number(hour);
  const mi = Number(minute);
  if (second === undefined) return { first: utc(mo, d, h, mi, 0, 0), last: utc(mo, d, h, mi + 1, 0, 0) - 1 };
  const s = Number(second);
  if (fraction === undefined) return { first: utc(mo, d, h, mi, s, 0), last: utc(mo, d, h, mi, s + 1, 0) - 1 };
  const ms = Math.floor(Number(fraction) * 1000);
  return { first: utc(mo, d, h, mi, s, ms), last: utc(mo, d, h, mi, s, ms) };
}
