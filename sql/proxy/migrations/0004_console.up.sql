-- What the console and operator routes of queen-proxy change, one function
-- per route: each calls the control-plane function of 0002 (which writes its
-- own control_plane audit row and announces the cluster) and appends the
-- row of the person who acted, in the same transaction. Ids only, never an
-- email or a name, go into the audit rows (0001).
--
-- Errors the proxy maps to answers: no_data_found (P0002) is 404,
-- invalid_parameter_value (22023) and object_not_in_prerequisite_state
-- (55000, the last-admin guard) are 400, unique_violation (23505) is 409.

-- console_issue_api_key stores the hash of a key the proxy generated and
-- shows once.
CREATE FUNCTION queen_proxy.console_issue_api_key(
    p_cluster uuid, p_actor uuid, p_name text, p_key_hash text, p_scopes text[]
) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id uuid;
BEGIN
    IF p_name IS NULL OR btrim(p_name) = '' OR length(p_name) > 100 THEN
        RAISE EXCEPTION 'a key needs a name of 1 to 100 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_id := queen_proxy.issue_api_key(p_cluster, btrim(p_name), p_key_hash, p_scopes, p_actor);
    PERFORM queen_proxy.record_operation(queen_proxy.cluster_tenant(p_cluster), p_cluster, 'user', p_actor,
        'console_api_key_issued', v_id::text, jsonb_build_object('name', btrim(p_name), 'scopes', to_jsonb(p_scopes)));
    RETURN v_id;
END;
$$;

-- console_revoke_api_key revokes a live key of this cluster; another
-- cluster's key, an unknown one and a revoked one are all the same
-- no_data_found, and change nothing.
CREATE FUNCTION queen_proxy.console_revoke_api_key(p_cluster uuid, p_actor uuid, p_key uuid) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name text;
BEGIN
    SELECT name INTO v_name FROM queen_proxy.api_keys
    WHERE id = p_key AND cluster_id = p_cluster AND revoked_at IS NULL FOR UPDATE;
    IF v_name IS NULL THEN
        RAISE EXCEPTION 'no live key % on this cluster', p_key USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM queen_proxy.revoke_api_key(p_key);
    PERFORM queen_proxy.record_operation(queen_proxy.cluster_tenant(p_cluster), p_cluster, 'user', p_actor,
        'console_api_key_revoked', p_key::text, jsonb_build_object('name', v_name));
END;
$$;

-- admins_left counts the admins of a cluster other than p_user. Callers
-- hold the cluster row's lock, so two demotions cannot both see one left.
CREATE FUNCTION queen_proxy.admins_left(p_cluster uuid, p_user uuid) RETURNS integer
    LANGUAGE sql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT count(*)::integer FROM queen_proxy.cluster_roles
    WHERE cluster_id = p_cluster AND role = 'admin' AND user_id <> p_user;
$$;

-- console_grant_role gives a user of the cluster's tenant a role on the
-- cluster, or changes it; demoting the last admin is refused.
CREATE FUNCTION queen_proxy.console_grant_role(p_cluster uuid, p_actor uuid, p_email text, p_role text)
RETURNS uuid
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_user uuid;
    v_previous text;
BEGIN
    IF p_role IS NULL OR p_role NOT IN ('admin', 'producer', 'consumer', 'viewer') THEN
        RAISE EXCEPTION 'role must be one of admin, producer, consumer, viewer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM 1 FROM queen_proxy.clusters WHERE id = p_cluster FOR UPDATE;
    v_user := queen_proxy.user_in_cluster_tenant(p_cluster, p_email);
    SELECT role INTO v_previous FROM queen_proxy.cluster_roles WHERE user_id = v_user AND cluster_id = p_cluster;
    IF v_previous = 'admin' AND p_role <> 'admin' AND queen_proxy.admins_left(p_cluster, v_user) = 0 THEN
        RAISE EXCEPTION 'the last admin of a cluster cannot be demoted' USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM queen_proxy.grant_cluster_role(p_cluster, p_email, p_role);
    PERFORM queen_proxy.record_operation(queen_proxy.cluster_tenant(p_cluster), p_cluster, 'user', p_actor,
        'console_member_granted', v_user::text, jsonb_build_object('role', p_role, 'previous', v_previous));
    RETURN v_user;
END;
$$;

-- console_revoke_role removes a user's role on the cluster; removing the
-- last admin is refused.
CREATE FUNCTION queen_proxy.console_revoke_role(p_cluster uuid, p_actor uuid, p_email text) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_user uuid;
    v_role text;
BEGIN
    PERFORM 1 FROM queen_proxy.clusters WHERE id = p_cluster FOR UPDATE;
    v_user := queen_proxy.user_in_cluster_tenant(p_cluster, p_email);
    SELECT role INTO v_role FROM queen_proxy.cluster_roles WHERE user_id = v_user AND cluster_id = p_cluster;
    IF v_role IS NULL THEN
        RAISE EXCEPTION '% has no role on this cluster', p_email USING ERRCODE = 'no_data_found';
    END IF;
    IF v_role = 'admin' AND queen_proxy.admins_left(p_cluster, v_user) = 0 THEN
        RAISE EXCEPTION 'the last admin of a cluster cannot be removed' USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM queen_proxy.revoke_cluster_role(p_cluster, p_email);
    PERFORM queen_proxy.record_operation(queen_proxy.cluster_tenant(p_cluster), p_cluster, 'user', p_actor,
        'console_member_revoked', v_user::text, jsonb_build_object('role', v_role));
    RETURN v_user;
END;
$$;

-- operator_cluster returns the tenant of a cluster on p_cell, or raises
-- no_data_found: an operator acts only on the cell it is signed in to.
CREATE FUNCTION queen_proxy.operator_cluster(p_cell uuid, p_cluster uuid) RETURNS uuid
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid;
BEGIN
    SELECT tenant_id INTO v_tenant FROM queen_proxy.clusters WHERE id = p_cluster AND cell_id = p_cell;
    IF v_tenant IS NULL THEN
        RAISE EXCEPTION 'no cluster % on this cell', p_cluster USING ERRCODE = 'no_data_found';
    END IF;
    RETURN v_tenant;
END;
$$;

-- operator_user returns the email of a user whose tenant has a cluster on
-- p_cell, or raises no_data_found.
CREATE FUNCTION queen_proxy.operator_user(p_cell uuid, p_user uuid) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_email text;
BEGIN
    SELECT u.email INTO v_email FROM queen_proxy.users u
    WHERE u.id = p_user
      AND EXISTS (SELECT 1 FROM queen_proxy.clusters c WHERE c.tenant_id = u.tenant_id AND c.cell_id = p_cell);
    IF v_email IS NULL THEN
        RAISE EXCEPTION 'no user % on this cell', p_user USING ERRCODE = 'no_data_found';
    END IF;
    RETURN v_email;
END;
$$;

-- operator_create_user creates a user in the tenant of a cluster on the
-- operator's cell, names it, and gives it a role on that cluster, in one
-- transaction. It cannot make an operator: set_operator has no HTTP path.
CREATE FUNCTION queen_proxy.operator_create_user(
    p_cell uuid, p_actor uuid, p_cluster uuid, p_email text, p_password_hash text, p_name text, p_role text
) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid := queen_proxy.operator_cluster(p_cell, p_cluster);
    v_user uuid;
BEGIN
    IF p_role IS NULL OR p_role NOT IN ('admin', 'producer', 'consumer', 'viewer') THEN
        RAISE EXCEPTION 'role must be one of admin, producer, consumer, viewer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_email IS NULL OR lower(btrim(p_email)) !~ '^[^@\s]+@[^@\s]+$' THEN
        RAISE EXCEPTION 'an email address is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_user := queen_proxy.create_user(v_tenant, p_email, p_password_hash);
    IF p_name IS NOT NULL THEN
        PERFORM queen_proxy.set_user_name(v_user, p_name);
    END IF;
    PERFORM queen_proxy.grant_cluster_role(p_cluster, p_email, p_role);
    PERFORM queen_proxy.record_operation(v_tenant, p_cluster, 'user', p_actor, 'operator_user_created', v_user::text,
        jsonb_build_object('role', p_role));
    RETURN v_user;
END;
$$;

-- operator_update_user changes a user's name and/or password (NULL leaves
-- it as it is).
CREATE FUNCTION queen_proxy.operator_update_user(
    p_cell uuid, p_actor uuid, p_user uuid, p_name text, p_password_hash text
) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Raises unless the user's tenant has a cluster on the cell.
    v_email text := queen_proxy.operator_user(p_cell, p_user);
    v_tenant uuid;
BEGIN
    IF p_name IS NULL AND p_password_hash IS NULL THEN
        RAISE EXCEPTION 'nothing to change: give a name or a password' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_name IS NOT NULL THEN
        PERFORM queen_proxy.set_user_name(p_user, p_name);
    END IF;
    IF p_password_hash IS NOT NULL THEN
        PERFORM queen_proxy.set_user_password(p_user, p_password_hash);
    END IF;
    SELECT tenant_id INTO v_tenant FROM queen_proxy.users WHERE id = p_user;
    PERFORM queen_proxy.record_operation(v_tenant, NULL, 'user', p_actor, 'operator_user_updated', p_user::text,
        jsonb_build_object('name', p_name IS NOT NULL, 'password', p_password_hash IS NOT NULL));
END;
$$;

-- operator_set_role gives a user a role on a cluster of its tenant on the
-- operator's cell.
CREATE FUNCTION queen_proxy.operator_set_role(p_cell uuid, p_actor uuid, p_user uuid, p_cluster uuid, p_role text)
RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid := queen_proxy.operator_cluster(p_cell, p_cluster);
    v_email text := queen_proxy.operator_user(p_cell, p_user);
BEGIN
    IF p_role IS NULL OR p_role NOT IN ('admin', 'producer', 'consumer', 'viewer') THEN
        RAISE EXCEPTION 'role must be one of admin, producer, consumer, viewer' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM queen_proxy.grant_cluster_role(p_cluster, v_email, p_role);
    PERFORM queen_proxy.record_operation(v_tenant, p_cluster, 'user', p_actor, 'operator_role_granted', p_user::text,
        jsonb_build_object('role', p_role));
END;
$$;

-- operator_revoke_role removes a user's role on a cluster of the
-- operator's cell.
CREATE FUNCTION queen_proxy.operator_revoke_role(p_cell uuid, p_actor uuid, p_user uuid, p_cluster uuid)
RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant uuid := queen_proxy.operator_cluster(p_cell, p_cluster);
    v_email text := queen_proxy.operator_user(p_cell, p_user);
    v_role text;
BEGIN
    SELECT role INTO v_role FROM queen_proxy.cluster_roles WHERE user_id = p_user AND cluster_id = p_cluster;
    IF v_role IS NULL THEN
        RAISE EXCEPTION 'user % has no role on cluster %', p_user, p_cluster USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM queen_proxy.revoke_cluster_role(p_cluster, v_email);
    PERFORM queen_proxy.record_operation(v_tenant, p_cluster, 'user', p_actor, 'operator_role_revoked', p_user::text,
        jsonb_build_object('role', v_role));
END;
$$;
