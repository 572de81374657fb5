// Great-circle distances for Location `near` (https://hl7.org/fhir/R4/location.html#positional): WGS84
// latitude and longitude in degrees, the Earth taken as a sphere of its mean radius. The haversine form
// stays accurate from centimetres to the antipode; the sphere differs from the ellipsoid by 0.5% at most.
// The search compares haversines in SQL (params/position.ts); these functions give the index range that
// prefilters it and the distance put on each match.

/** The IUGG mean radius of the Earth, in metres. */
export const EARTH_RADIUS_M = 6_371_008.8;

export interface GeoPoint {
  readonly latitude: number;
  readonly longitude: number;
}

const radians = (degrees: number): number => (degrees * Math.PI) / 180;
const degrees = (radians: number): number => (radians * 180) / Math.PI;

/** hav(θ) = sin²(θ/2) of the central angle between two points: 0 (same point) to 1 (antipodes). */
export function haversine(a: GeoPoint, b: GeoPoint): number {
  const dLat = Math.sin(radians(b.latitude - a.latitude) / 2);
  const dLon = Math.sin(radians(b.longitude - a.longitude) / 2);
  return dLat * dLat + Math.cos(radians(a.latitude)) * Math.cos(radians(b.latitude)) * dLon * dLon;
}

/** The great-circle distance between two points, in metres. */
export function distanceMetres(a: GeoPoint, b: GeoPoint): number {
  return 2 * EARTH_RADIUS_M * Math.asin(Math.sqrt(Math.min(1, haversine(a, b))));
}

/** The haversine of a distance: a point is within `metres` of another when their haversine is at most this. */
export function haversineOfDistance(metres: number): number {
  const angle = Math.min(Math.PI, metres / EARTH_RADIUS_M);
  return Math.sin(angle / 2) ** 2;
}

/**
 * The latitude and longitude ranges (degrees) that hold every point within `metres` of `center`: the
 * index range that prefilters a `near` search. `longitudes` is empty when every longitude may be within
 * reach (a pole is inside the circle), and has two ranges when the circle crosses the antimeridian.
 * (J. P. Matuschek, "Finding Points Within a Distance of a Latitude/Longitude Using Bounding
 * Coordinates".)
 */
export function boundingBox(
  center: GeoPoint,
  metres: number,
): { latitude: [number, number]; longitudes: [number, number][] } {
  const angle = metres / EARTH_RADIUS_M;
  const south = center.latitude - degrees(angle);
  const north = center.latitude + degrees(angle);
  if (south <= -90 || north >= 90) return { latitude: [Math.max(south, -90), Math.min(north, 90)], longitudes: [] };
  const spread = degrees(Math.asin(Math.sin(angle) / Math.cos(radians(center.latitude))));
  const west = center.longitude - spread;
  const east = center.longitude + spread;
  const longitudes: [number, number][] =
    west < -180
      ? [
          [west + 360, 180],
          [-180, east],
        ]
      : east > 180
        ? [
            [west, 180],
            [-180, east - 360],
          ]
        : [[west, east]];
  return { latitude: [south, north], longitudes };
}
