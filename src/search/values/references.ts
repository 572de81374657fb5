// Reference values (https://hl7.org/fhir/R4/search.html#reference) as the index stores them: a local
// reference (`Patient/1`, `Patient/1/_history/2`, or an absolute URL on our own base) becomes
// (target_type, target_id); anything else (other servers, canonical URLs, urn:uuid left unresolved,
// conditional references) is kept whole as a URL, with an empty target_type.

export interface ReferenceKey {
  /** '' for a URL. */
  readonly type: string;
  /** The id, or the whole URL when type is ''. */
  readonly id: string;
}

const LOCAL = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;

export class ReferenceParser {
  private readonly bases: string[];

  /** @param baseUrl the server's FHIR base (`https://host/fhir`); http and https both count as ours. */
  constructor(
    baseUrl: string,
    private readonly isResourceType: (name: string) => boolean,
  ) {
    const withoutScheme = baseUrl.replace(/\/+$/, '').replace(/^https?:\/\//, '');
    this.bases = [`http://${withoutScheme}/`, `https://${withoutScheme}/`];
  }

  parse(reference: string): ReferenceKey | undefined {
    if (reference === '' || reference.startsWith('#')) return undefined;
    let local = reference;
    for (const base of this.bases) {
      if (reference.startsWith(base)) {
        local = reference.slice(base.length);
        break;
      }
    }
    const m = LOCAL.exec(local);
    if (m && this.isResourceType(m[1])) return { type: m[1], id: m[2] };
    return { type: '', id: reference };
  }
}
