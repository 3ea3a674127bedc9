import { runServiceMain } from '@ironflow/services';

void runServiceMain('scheduler', ['scheduler']);
