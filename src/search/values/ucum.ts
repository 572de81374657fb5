// UCUM canonical units (https://hl7.org/fhir/R4/search.html#quantity): quantities in UCUM are also
// indexed in base units, so `Encounter?length=gt2|http://unitsofmeasure.org|d` finds `4320 min`.
// @lhncbc/ucum-lhc is loaded on first use (it costs ~15 MB), and every unit's answer is cached.
import { createRequire } from 'node:module';

export const UCUM_SYSTEM = 'http://unitsofmeasure.org';

export interface CanonicalUnit {
  /** Base units with exponents, e.g. `g.m-3`, `s`, `K`; empty for dimensionless units. */
  readonly code: string;
  /** value in base units = value × factor + offset (offset only for Cel, [degF]...). */
  readonly factor: number;
  readonly offset: number;
}

interface UcumUtils {
  convertToBaseUnits(
    unit: string,
    value: number,
  ): { status: string; magnitude?: number; unitToExp?: Record<string, number>; fromUnitIsSpecial?: boolean };
}

let utils: UcumUtils | undefined;
const cache = new Map<string, CanonicalUnit | null>();

function ucum(): UcumUtils {
  if (!utils) {
    const require = createRequire(import.meta.url);
    const pkg = require('@lhncbc/ucum-lhc') as { UcumLhcUtils: { getInstance(): UcumUtils } };
    utils = pkg.UcumLhcUtils.getInstance();
  }
  return utils;
}

/** The canonical form of a UCUM unit code, or undefined when it is not valid UCUM. */
export function canonicalUnit(code: string): CanonicalUnit | undefined {
  const cached = cache.get(code);
  if (cached !== undefined) return cached ?? undefined;
  let result: CanonicalUnit | null = null;
  try {
    const one = ucum().convertToBaseUnits(code, 1);
    if (one.status === 'succeeded' && one.unitToExp && one.magnitude !== undefined) {
      const unitCode = Object.entries(one.unitToExp)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([unit, exp]) => (exp === 1 ? unit : `${unit}${exp}`))
        .join('.');
      if (one.fromUnitIsSpecial) {
        // Non-linear (affine) units: derive factor and offset from two points.
        const zero = ucum().convertToBaseUnits(code, 0).magnitude ?? 0;
        result = { code: unitCode, factor: one.magnitude - zero, offset: zero };
      } else {
        result = { code: unitCode, factor: one.magnitude, offset: 0 };
      }
    }
  } catch {
    result = null;
  }
  if (cache.size > 10_000) cache.clear();
  cache.set(code, result);
  return result ?? undefined;
}

/** Rounds away binary noise (1000 × 0.001) so equal quantities in different units compare equal. */
export function toCanonicalValue(value: number, unit: CanonicalUnit): number {
  return Number((value * unit.factor + unit.offset).toPrecision(15));
}
