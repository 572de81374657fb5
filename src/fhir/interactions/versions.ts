// https://hl7.org/fhir/R4/capabilitystatement-operation-versions.html: the FHIR versions this server
// speaks (R4, `4.0`) and its default. As a Parameters resource (JSON or XML, as negotiated) when the
// client asks for a FHIR format (`_format`, or an Accept that prefers a FHIR or XML media type to
// application/json); otherwise the plain JSON object the operation's page gives "for the convenience of
// clients" (`Accept: application/json`, or none).
import type { FhirResponse } from '../response.js';

const VERSION = '4.0';

/** The quality an Accept header gives `mediaType` by name (a `*` range does not count as asking for it). */
function namedQuality(accept: string, mediaTypes: readonly string[]): number {
  let best = 0;
  for (const range of accept.split(',')) {
    const [type, ...params] = range.split(';').map((part) => part.trim().toLowerCase());
    if (!mediaTypes.includes(type)) continue;
    const q = params.find((p) => p.startsWith('q='));
    const quality = q === undefined ? 1 : Number(q.slice(2));
    if (Number.isFinite(quality)) best = Math.max(best, quality);
  }
  return best;
}

/** Does the client ask for the FHIR representation (a Parameters resource)? */
export function asksForFhirFormat(format: string | undefined, accept: string | undefined): boolean {
  // R4 http.html: every `_format` value names a FHIR format (`json` and `application/json` included).
  if (format !== undefined) return true;
  if (!accept) return false;
  const fhir = namedQuality(accept, [
    'application/fhir+json',
    'application/json+fhir',
    'application/fhir+xml',
    'application/xml+fhir',
    'application/xml',
    'text/xml',
  ]);
  return fhir > 0 && fhir >= namedQuality(accept, ['application/json']);
}

export function versionsInteraction(format: string | undefined, accept: string | undefined): FhirResponse {
  if (!asksForFhirFormat(format, accept)) {
    return { status: 200, body: { versions: [VERSION], default: VERSION }, contentType: 'application/json' };
  }
  // valueString as the R4 page's example writes it (and clients written against it read it).
  return {
    status: 200,
    body: {
      resourceType: 'Parameters',
      parameter: [
        { name: 'version', valueString: VERSION },
        { name: 'default', valueString: VERSION },
      ],
    },
  };
}
