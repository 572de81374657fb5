// Location `near` (https://hl7.org/fhir/R4/location.html#positional), R4's one `special` parameter:
// `near=[latitude]|[longitude]|[distance]|[units]`, the Locations whose `position` is within that
// great-circle distance (values/geo.ts). Units are a UCUM length (`km` when left out, as R4 says); the
// distance, when left out, is DEFAULT_DISTANCE_METRES.
//
// Rows: idx_number(lo, hi) = (latitude, longitude), one per position, so the value index (sp, lo, hi, pk)
// serves the prefilter: the latitude band is its range, the longitude band a test on the same entries.
// The exact test is the haversine in SQL, the same text on both databases (SQLite's math functions are
// compiled into better-sqlite3). It is a condition on the index rows like any other parameter's, so
// keyset paging, counts, chains and `:missing` work as for every parameter, and each match is visited
// once. execute.ts puts the distance on each match (`origins`).
import type { Node } from '../expressions/evaluate.js';
import { and, or, sql } from '../sql/fragment.js';
import type { Sql } from '../sql/fragment.js';
import { unescapeValue, splitUnescaped } from '../values/escapes.js';
import { boundingBox, haversineOfDistance } from '../values/geo.js';
import type { GeoPoint } from '../values/geo.js';
import { canonicalUnit } from '../values/ucum.js';
import type { ExtractContext, ParamIds, ParamTypeHandler, RowMatch } from './param-type.js';
import { assertModifier, invalid } from './param-type.js';

/** `near` without a distance: what this server calls near (R4 leaves it to the server). */
export const DEFAULT_DISTANCE_METRES = 1000;

/** One `near` value: the point and the distance from it, in metres. */
export interface NearValue extends GeoPoint {
  readonly metres: number;
}

const DECIMAL = /^[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/;

function number(name: string, text: string, what: string, min: number, max: number): number {
  const value = DECIMAL.test(text) ? Number(text) : NaN;
  if (!Number.isFinite(value) || value < min || value > max) {
    throw invalid(name, `${name}: the ${what} "${text}" is not a number from ${min} to ${max}`);
  }
  return value;
}

/** Parses `latitude|longitude[|distance[|units]]`; 400 for anything else. */
export function parseNear(name: string, value: string): NearValue {
  const parts = splitUnescaped(value, '|').map((p) => unescapeValue(p).trim());
  if (parts.length < 2 || parts.length > 4) {
    throw invalid(name, `${name}: "${value}" is not latitude|longitude|distance|units`);
  }
  const latitude = number(name, parts[0], 'latitude', -90, 90);
  const longitude = number(name, parts[1], 'longitude', -180, 180);
  if (parts[2] === undefined || parts[2] === '') return { latitude, longitude, metres: DEFAULT_DISTANCE_METRES };
  const distance = number(name, parts[2], 'distance', 0, Number.MAX_VALUE);
  const code = parts[3] === undefined || parts[3] === '' ? 'km' : parts[3];
  const unit = canonicalUnit(code);
  if (!unit || unit.code !== 'm' || unit.offset !== 0) {
    throw invalid(name, `${name}: "${code}" is not a UCUM unit of length (such as km, m or [mi_i])`);
  }
  return { latitude, longitude, metres: distance * unit.factor };
}

/** The index range of one value, then the exact distance. */
function nearCondition(near: NearValue): Sql {
  const box = boundingBox(near, near.metres);
  const longitudes = or(box.longitudes.map(([west, east]) => sql`(t.hi >= ${west} AND t.hi <= ${east})`));
  const cosLatitude = Math.cos((near.latitude * Math.PI) / 180);
  // hav(θ) of the point and the row, compared with hav(distance / R): no asin, so no rounding past 1.
  const haversine = sql`power(sin(radians(t.lo - ${near.latitude}) / 2), 2) + cos(radians(t.lo)) * ${cosLatitude} * power(sin(radians(t.hi - ${near.longitude}) / 2), 2) <= ${haversineOfDistance(near.metres)}`;
  return and([
    sql`t.lo >= ${box.latitude[0]}`,
    sql`t.lo <= ${box.latitude[1]}`,
    box.longitudes.length > 0 ? longitudes : sql``,
    haversine,
  ]);
}

/** A Location.position's coordinates, when both are there and on the globe. */
export function positionOf(value: unknown): GeoPoint | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const { latitude, longitude } = value as { latitude?: unknown; longitude?: unknown };
  if (typeof latitude !== 'number' || typeof longitude !== 'number') return undefined;
  if (Math.abs(latitude) > 90 || Math.abs(longitude) > 180) return undefined;
  return { latitude, longitude };
}

export const positionParam: ParamTypeHandler = {
  type: 'special',
  table: 'idx_number',
  modifiers: [],

  extract(nodes: readonly Node[], ids: ParamIds, grp, ctx: ExtractContext): void {
    for (const node of nodes) {
      const point = positionOf(node.value);
      if (point) ctx.sink.add('idx_number', [ids.sp, grp, point.latitude, point.longitude]);
    }
  },

  match(values, modifier, ctx): RowMatch {
    assertModifier(this, ctx.name, modifier);
    const points = values.map((value) => parseNear(ctx.name, value));
    return {
      condition: or(points.map(nearCondition)),
      rangeValues: values.length,
      // A few kilometres is as selective as a day: the estimate (estimate.ts) decides whether it drives.
      selectivity: 2,
      origins: points,
    };
  },
};
