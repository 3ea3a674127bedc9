import { runServiceMain } from '@ironflow/services';

void runServiceMain('capacity-scanner', ['capacity-scanner']);
