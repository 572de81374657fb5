// Dates as ranges (https://hl7.org/fhir/R4/search.html#date): every date, dateTime, instant and
// search value stands for the half-open interval [lo, hi) of the time it names, in milliseconds since
// the epoch (UTC). `1980` is [1980-01-01, 1981-01-01); `2020-03-04T10:00Z` is one minute long
// when written to the minute, one second when written to the second, one millisecond with a fraction.

/** Far past and far future (the bounds of a JavaScript Date): open Period ends. */
export const MIN_TIME = -8_640_000_000_000_000;
export const MAX_TIME = 8_640_000_000_000_000;

export interface TimeRange {
  readonly lo: number;
  /** Exclusive. */
  readonly hi: number;
}

const DATE_TIME =
  /^(-?[0-9]{4})(?:-([0-9]{2})(?:-([0-9]{2})(?:[T ]([0-9]{2})(?::([0-9]{2})(?::([0-9]{2})(?:\.([0-9]+))?)?)?(Z|[+-][0-9]{2}:?[0-9]{2})?)?)?)?$/;

/**
 * Parses a FHIR date, dateTime or instant (or a search value, which may also stop at the hour or minute
 * and may omit the zone: then UTC is assumed) into the range it covers. Undefined when malformed.
 */
export function parseDateRange(text: string): TimeRange | undefined {
  const m = DATE_TIME.exec(text.trim());
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const year = Number(y);
  const month = mo === undefined ? undefined : Number(mo);
  const day = d === undefined ? undefined : Number(d);
  if (month !== undefined && (month < 1 || month > 12)) return undefined;
  if (day !== undefined && (day < 1 || day > daysInMonth(year, month!))) return undefined;
  const hour = h === undefined ? undefined : Number(h);
  const minute = mi === undefined ? undefined : Number(mi);
  const second = s === undefined ? undefined : Number(s);
  if (hour !== undefined && hour > 24) return undefined;
  if (minute !== undefined && minute > 59) return undefined;
  if (second !== undefined && second > 60) return undefined;
  let offset = 0;
  if (zone && zone !== 'Z') {
    const sign = zone[0] === '-' ? -1 : 1;
    const digits = zone.slice(1).replace(':', '');
    const zh = Number(digits.slice(0, 2));
    const zm = Number(digits.slice(2, 4));
    if (zh > 14 || zm > 59) return undefined;
    offset = sign * (zh * 60 + zm) * 60_000;
  }
  const utc = (yy: number, mm: number, dd: number, hh = 0, mn = 0, ss = 0, ms = 0): number => {
    const date = new Date(0);
    date.setUTCFullYear(yy, mm - 1, dd);
    date.setUTCHours(hh, mn, ss, ms);
    return date.getTime();
  };
  if (month === undefined) return { lo: utc(year, 1, 1), hi: utc(year + 1, 1, 1) };
  if (day === undefined) return { lo: utc(year, month, 1), hi: utc(year, month + 1, 1) };
  if (hour === undefined) return { lo: utc(year, month, day), hi: utc(year, month, day + 1) };
  let lo: number;
  let width: number;
  if (minute === undefined) {
    lo = utc(year, month, day, hour);
    width = 3_600_000;
  } else if (second === undefined) {
    lo = utc(year, month, day, hour, minute);
    width = 60_000;
  } else if (frac === undefined) {
    lo = utc(year, month, day, hour, minute, second);
    width = 1000;
  } else {
    const digits = Math.min(frac.length, 3);
    lo = utc(year, month, day, hour, minute, second, Number(frac.slice(0, 3).padEnd(3, '0')));
    width = 10 ** (3 - digits);
  }
  return { lo: lo - offset, hi: lo - offset + width };
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** A Period: from the start of `start` to the end of `end`; a missing end is open (ongoing). */
export function periodRange(period: { start?: unknown; end?: unknown }): TimeRange | undefined {
  const start = typeof period.start === 'string' ? parseDateRange(period.start) : undefined;
  const end = typeof period.end === 'string' ? parseDateRange(period.end) : undefined;
  if (!start && !end) return undefined;
  return { lo: start ? start.lo : MIN_TIME, hi: end ? end.hi : MAX_TIME };
}
