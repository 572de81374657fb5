// Numbers with their implicit precision (https://hl7.org/fhir/R4/search.html#number): a search for
// `100` means [99.5, 100.5), `1e2` means [50, 150), `0.10` means [0.095, 0.105).

export interface DecimalValue {
  readonly value: number;
  /** Half the unit of the last significant digit: the value stands for [value - half, value + half). */
  readonly half: number;
}

const DECIMAL = /^[-+]?([0-9]+)(?:\.([0-9]+))?(?:[eE]([-+]?[0-9]+))?$/;

export function parseDecimal(text: string): DecimalValue | undefined {
  const m = DECIMAL.exec(text.trim());
  if (!m) return undefined;
  const value = Number(text);
  if (!Number.isFinite(value)) return undefined;
  const fractionDigits = m[2]?.length ?? 0;
  const exponent = m[3] ? Number(m[3]) : 0;
  let half: number;
  if (m[3]) {
    // Scientific notation: the precision is that of the mantissa, scaled by the exponent.
    half = 0.5 * 10 ** (exponent - fractionDigits);
  } else {
    half = 0.5 * 10 ** -fractionDigits;
  }
  return { value, half };
}
