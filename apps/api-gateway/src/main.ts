import { runServiceMain } from '@ironflow/services';

void runServiceMain('api-gateway', ['api-gateway']);
