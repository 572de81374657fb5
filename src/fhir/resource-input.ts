import { AppError } from '../errors.js';
import type { OutcomeIssue } from '../errors.js';
import type { FhirResource } from '../storage/store.js';
import type { ValidationIssue } from '../validation/validate.js';
import { requireBinaryContext, requireKnowableReferences } from './access.js';
import { checkSubscription } from './subscription-input.js';
import type { FhirRequest, FhirServices } from './services.js';

/**
 * Checks a request body that should be a resource of `type`: 400 when it is not a JSON object of that
 * type (or carries another id than the URL's), then the R4 validation (401 by docs/api.md, or 400/422
 * with AMBIENT_FHIR_STANDARD_STATUS=1), then the stored profiles its meta.profile names (the same status),
 * then what its references may point at (access.ts). Nothing is stored unless this returns.
 */
export async function acceptResource(
  request: FhirRequest,
  type: string,
  body: unknown,
  expectedId?: string,
): Promise<FhirResource> {
  const { services } = request;
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new AppError('invalid-json', 'The request body must be a JSON object holding a FHIR resource');
  }
  const resource = body as Record<string, unknown>;
  if (resource.resourceType !== type) {
    throw new AppError(
      'resource-type-mismatch',
      `The body's resourceType (${JSON.stringify(resource.resourceType ?? null)}) does not match the URL's type ${type}`,
      { expression: 'resourceType' },
    );
  }
  if (expectedId !== undefined) {
    if (resource.id === undefined) {
      throw new AppError('id-mismatch', `The body must carry "id": "${expectedId}", the id in the URL`, {
        expression: `${type}.id`,
      });
    }
    if (resource.id !== expectedId) {
      throw new AppError(
        'id-mismatch',
        `The body's id ${JSON.stringify(resource.id)} differs from the URL's ${expectedId}`,
        {
          expression: `${type}.id`,
        },
      );
    }
  }
  // The server assigns versionId and lastUpdated; the client's values are not validated against the
  // data types because they are replaced, but their presence must not make the resource invalid.
  const issues = services.validate(resource).filter((issue) => issue.severity === 'error');
  if (issues.length > 0) throw invalidResourceError(services, type, issues);
  if (type === 'StructureDefinition') services.profiles.checkDefinition(resource);
  const profileIssues = (await services.profiles.check(request, resource)).filter((i) => i.severity === 'error');
  if (profileIssues.length > 0) throw invalidResourceError(services, type, profileIssues);
  requireKnowableReferences(request, resource as FhirResource, expectedId);
  if (type === 'Binary') requireBinaryContext(request, resource, 'write');
  if (type === 'Subscription') {
    const checked = checkSubscription(request, resource as FhirResource);
    if (checked.issues.length > 0) throw invalidResourceError(services, type, checked.issues);
    return checked.resource;
  }
  return resource as FhirResource;
}

function invalidResourceError(services: FhirServices, type: string, issues: ValidationIssue[]): AppError {
  const outcomeIssues: OutcomeIssue[] = issues.map((issue) => ({
    severity: 'error',
    code: issue.code,
    diagnostics: issue.diagnostics,
    expression: [issue.expression],
  }));
  const summary = `${type} is not valid: ${issues.length} issue${issues.length === 1 ? '' : 's'}`;
  if (!services.config.fhirStandardStatus) return new AppError('invalid-resource', summary, { issues: outcomeIssues });
  const onlyInvariants = issues.every((issue) => issue.rule === 'invariant');
  return new AppError(onlyInvariants ? 'invariant-violated-standard' : 'invalid-resource-standard', summary, {
    issues: outcomeIssues,
  });
}
