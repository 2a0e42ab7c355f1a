"""The actors that run connectors: worker, coordinator, connector, source tasks, offset mirror."""
