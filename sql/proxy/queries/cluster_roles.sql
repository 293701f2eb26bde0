-- ClusterRoleOf is a user's role on a cluster.
-- name: ClusterRoleOf :one
SELECT role FROM queen_proxy.cluster_roles WHERE user_id = @user_id AND cluster_id = @cluster_id;

-- ClusterMembers lists the users with a role on a cluster, for the console.
-- name: ClusterMembers :many
SELECT u.id, u.email, u.name, r.role, r.created_at, u.last_login_at
FROM queen_proxy.cluster_roles r
JOIN queen_proxy.users u ON u.id = r.user_id
WHERE r.cluster_id = @cluster_id
ORDER BY r.role = 'admin' DESC, u.email;

-- ClusterRoleConsoleGrant gives or changes a member's role, with the
-- last-admin guard and the audit rows.
-- name: ClusterRoleConsoleGrant :one
SELECT queen_proxy.console_grant_role(@cluster_id, @actor, @email, @role)::uuid AS user_id;

-- ClusterRoleConsoleRevoke removes a member, with the last-admin guard and
-- the audit rows.
-- name: ClusterRoleConsoleRevoke :one
SELECT queen_proxy.console_revoke_role(@cluster_id, @actor, @email)::uuid AS user_id;

-- ClusterRoleOperatorSet gives a user a role, as an operator.
-- name: ClusterRoleOperatorSet :exec
SELECT queen_proxy.operator_set_role(@cell_id, @actor, @user_id, @cluster_id, @role);

-- ClusterRoleOperatorRevoke removes a user's role, as an operator.
-- name: ClusterRoleOperatorRevoke :exec
SELECT queen_proxy.operator_revoke_role(@cell_id, @actor, @user_id, @cluster_id);
