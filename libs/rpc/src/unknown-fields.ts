import type { DescField, DescMessage, Message } from '@bufbuild/protobuf';

/**
 * The fields of a binary protobuf request its schema does not have, at any depth, as paths in
 * the REST registration's style (`#14`, `triggers.0.#7`: the unknown field's number after `#`).
 * protobuf-es keeps them in `$unknown` when it reads binary (Connect binary, gRPC); JSON requests
 * are checked by the JSON layer, which names them. Well-known types (Struct…) are not walked.
 */
export function unknownFieldPaths(desc: DescMessage, message: Message, path = ''): string[] {
  const at = (name: string) => (path ? `${path}.${name}` : name);
  const found = [...new Set((message.$unknown ?? []).map((u) => u.no))].map((no) => at(`#${no}`));
  for (const field of desc.fields) {
    const value = fieldValue(message, field);
    if (value === undefined) continue;
    if (field.fieldKind === 'message' && !isWellKnown(field.message)) {
      found.push(...unknownFieldPaths(field.message, value as Message, at(field.name)));
    } else if (field.fieldKind === 'list' && field.listKind === 'message' && !isWellKnown(field.message)) {
      (value as Message[]).forEach((item, i) => found.push(...unknownFieldPaths(field.message, item, at(`${field.name}.${i}`))));
    }
  }
  return found;
}

function fieldValue(message: Message, field: DescField): unknown {
  const record = message as unknown as Record<string, unknown>;
  if (!field.oneof) return record[field.localName];
  const oneof = record[field.oneof.localName] as { case?: string; value?: unknown } | undefined;
  return oneof?.case === field.localName ? oneof.value : undefined;
}

function isWellKnown(desc: DescMessage): boolean {
  return desc.typeName.startsWith('google.protobuf.');
}
