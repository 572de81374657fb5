// Great-circle distances and the bounding box that prefilters `near`: distances against known ones
// along meridians and the equator, and, for random circles anywhere (poles and the antimeridian
// included), every point within the distance inside the box.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { boundingBox, distanceMetres, EARTH_RADIUS_M, haversine, haversineOfDistance } from './geo.js';
import type { GeoPoint } from './geo.js';

const degree = (Math.PI / 180) * EARTH_RADIUS_M;

/** The point `metres` from `from` on the initial bearing `bearing` (radians), by spherical trigonometry. */
function destination(from: GeoPoint, bearing: number, metres: number): GeoPoint {
  const φ1 = (from.latitude * Math.PI) / 180;
  const λ1 = (from.longitude * Math.PI) / 180;
  const δ = metres / EARTH_RADIUS_M;
  const φ2 = Math.asin(Math.sin(φ1) * Math.cos(δ) + Math.cos(φ1) * Math.sin(δ) * Math.cos(bearing));
  const λ2 = λ1 + Math.atan2(Math.sin(bearing) * Math.sin(δ) * Math.cos(φ1), Math.cos(δ) - Math.sin(φ1) * Math.sin(φ2));
  const longitude = ((((λ2 * 180) / Math.PI + 540) % 360) + 360) % 360;
  return { latitude: (φ2 * 180) / Math.PI, longitude: longitude - 180 };
}

function inBox(box: ReturnType<typeof boundingBox>, point: GeoPoint): boolean {
  // destination() itself rounds: asin near 1 loses about 1e-9 degrees (a tenth of a millimetre).
  const slack = 1e-7;
  if (point.latitude < box.latitude[0] - slack || point.latitude > box.latitude[1] + slack) return false;
  if (box.longitudes.length === 0) return true;
  return box.longitudes.some(([west, east]) => point.longitude >= west - slack && point.longitude <= east + slack);
}

describe('great-circle distance', () => {
  it.each([
    [{ latitude: 0, longitude: 0 }, { latitude: 1, longitude: 0 }, degree],
    [{ latitude: 0, longitude: 179.9 }, { latitude: 0, longitude: -179.9 }, 0.2 * degree],
    [{ latitude: 89.5, longitude: 0 }, { latitude: 89.5, longitude: 180 }, degree],
    [{ latitude: 10, longitude: 20 }, { latitude: -10, longitude: -160 }, 180 * degree],
    [{ latitude: 51.3397, longitude: 12.3731 }, { latitude: 51.3397, longitude: 12.3731 }, 0],
  ])('%j to %j', (a, b, metres) => {
    // Within a millimetre, and a metre at the antipode (where asin's slope is steepest).
    expect(Math.abs(distanceMetres(a, b) - metres)).toBeLessThan(metres > 1e7 ? 1 : 0.001);
    expect(Math.abs(distanceMetres(b, a) - metres)).toBeLessThan(metres > 1e7 ? 1 : 0.001);
  });

  it('compares by haversine: a point is within d exactly when hav ≤ hav(d)', () => {
    const florence = { latitude: 43.77925, longitude: 11.24626 };
    const leipzig = { latitude: 51.3397, longitude: 12.3731 };
    const metres = distanceMetres(florence, leipzig);
    expect(metres / 1000).toBeCloseTo(844.9, 1);
    expect(haversine(florence, leipzig)).toBeLessThanOrEqual(haversineOfDistance(metres + 1));
    expect(haversine(florence, leipzig)).toBeGreaterThan(haversineOfDistance(metres - 1));
    expect(haversineOfDistance(1e12)).toBe(1);
  });
});

describe('the bounding box', () => {
  // Centres 100 m or more from a pole: closer, the test's own destination() loses the longitude
  // (atan2 of two rounding errors), not the box.
  const point = fc.record({
    latitude: fc.double({ min: -89.999, max: 89.999, noNaN: true }),
    longitude: fc.double({ min: -180, max: 180, noNaN: true }),
  });

  it('holds every point within the distance, anywhere on the globe', () => {
    fc.assert(
      fc.property(
        point,
        fc.double({ min: 1, max: 5_000_000, noNaN: true }),
        fc.double({ min: 0, max: 2 * Math.PI, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (center, metres, bearing, fraction) => {
          const box = boundingBox(center, metres);
          const inside = destination(center, bearing, metres * fraction);
          return inBox(box, inside);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('is split at the antimeridian and open at a pole', () => {
    expect(boundingBox({ latitude: 0, longitude: 179.9 }, 50_000).longitudes).toHaveLength(2);
    expect(boundingBox({ latitude: 89.5, longitude: 0 }, 200_000).longitudes).toEqual([]);
    const florence = boundingBox({ latitude: 43.77925, longitude: 11.24626 }, 900_000);
    // Kraków is inside the box, though 960 km away: the SQL's exact test leaves it out.
    expect(inBox(florence, { latitude: 50.06143, longitude: 19.93658 })).toBe(true);
  });
});
