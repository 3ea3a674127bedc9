import { runServiceMain } from '@ironflow/services';

void runServiceMain('audit-writer', ['audit-writer']);
