-- fleet_hour_tenants (migration 0049) held, per hour, instance and tenant, the energy of the
-- GPU split over the tenants billed on it, rolled up by the attribution service on every pass
-- for a reader (fleet.TenantEnergy) that no command called: the tenant report's energy comes
-- from the samples and the stored minutes (attribution_minutes.energy_j, migration 0050). The
-- roll-up is gone, and so is its table.
DROP TABLE IF EXISTS fleet_hour_tenants
