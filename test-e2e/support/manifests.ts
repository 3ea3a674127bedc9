import { parseAllDocuments } from 'yaml';

/** One rendered Kubernetes object, loosely typed: tests read the fields they check. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: any;
  stringData?: Record<string, string>;
}

/** Parses `helm template` output (several YAML documents) into objects; throws on a YAML error. */
export function parseManifests(text: string): Manifest[] {
  return parseAllDocuments(text).flatMap((doc) => {
    if (doc.errors.length) throw new Error(`rendered YAML does not parse: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value = doc.toJS() as Manifest | null;
    return value ? [value] : [];
  });
}

/** The objects of `kind`, by name. */
export function byKind(manifests: Manifest[], kind: string): Map<string, Manifest> {
  return new Map(manifests.filter((m) => m.kind === kind).map((m) => [m.metadata.name, m]));
}
