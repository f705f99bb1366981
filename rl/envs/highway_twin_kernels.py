"""Numba kernels of the Highway twin: highway-env's ``highway-v0`` scene, restated.

Reference: highway-env **1.12.1** (``highway_env.envs.highway_env.HighwayEnv``)
with the TEQL paper's configuration (`rl.envs.highway.PAPER_CONFIG`: 3 lanes,
10 other vehicles, simulation 5 Hz, policy 1 Hz, 50 s). Every function below
restates one highway-env method, in the same floating-point order, for a
straight road of ``LANES`` lanes (lane ``l`` runs from (0, 4 l) to
(10 000, 4 l), so a lane's local coordinates are (x, y - 4 l)):

- `reset_scene`: ``HighwayEnv._create_vehicles`` (``Vehicle.create_random``,
  ``IDMVehicle.randomize_behavior``), drawing from the env's ``np_random``
  exactly as it does (``choice`` of a lane: a 32-bit Lemire draw; ``uniform``
  speeds, spacings and IDM exponents);
- `simulate_step`: ``AbstractEnv._simulate``: the ego's meta-action
  (``MDPVehicle.act``), ``Road.act`` (``ControlledVehicle`` steering and speed
  control, ``IDMVehicle`` IDM acceleration and MOBIL lane changes),
  ``Road.step`` (``Vehicle.step``'s kinematic bicycle model, then
  ``RoadObject.handle_collisions``: the distance pre-test and the polygons'
  separating-axis test, ``utils.are_polygons_intersecting``);
- `observe`: ``KinematicObservation.observe`` (x, y, vx of the ego and its 2
  nearest vehicles ahead, relative, sorted by longitudinal distance) followed by
  `rl.envs.highway.Highway`'s scaling.

Vehicle state is one float64 row per vehicle (vehicle 0 is the ego), fields
named by the ``F_*`` indices. highway-env evaluates ``sin``, ``cos``, ``tan``,
``arctan``, ``arcsin`` and ``power`` through NumPy, which on AVX-512 machines
uses SVML; Numba calls the C library. The two can differ in the last bit, so
the twin is equal to highway-env to rounding, not bit for bit (see
``docs/environments.md``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from rl.envs import seeding_kernels
from rl.envs.seeding_kernels import bounded_uint32, next_double
from rl.jit import drop_stale

drop_stale(__file__, [seeding_kernels.__file__])

LANES = 3
N_OTHERS = 10
N_VEHICLES = N_OTHERS + 1
LANE_WIDTH = 4.0
LANE_LENGTH = 10000.0
SPEED_LIMIT = 30
FRAMES = 5  # simulation_frequency // policy_frequency
DT = 1 / 5
DURATION = 50
EGO_SPEED = 25.0
EGO_SPACING = 2
OTHERS_SPACING = 1 / 1  # 1 / vehicles_density
#: ``np.exp(-5 / 40 * lanes)`` of ``Vehicle.create_random``, through NumPy as there.
SPACING_DECAY = float(np.exp(-5 / 40 * LANES))
TARGET_SPEEDS = (20.0, 25.0, 30.0)  # MDPVehicle.DEFAULT_TARGET_SPEEDS

# Vehicle (kinematics.py), ControlledVehicle (controller.py), IDMVehicle (behavior.py).
LENGTH = 5.0
WIDTH = 2.0
DIAGONAL = math.sqrt(LENGTH**2 + WIDTH**2)
MAX_SPEED = 40.0
MIN_SPEED = -40.0
KP_A = 1 / 0.6
KP_HEADING = 1 / 0.2
KP_LATERAL = 1 / 0.6
TAU_PURSUIT = 0.5 * 0.2
MAX_STEERING_ANGLE = np.pi / 3
ACC_MAX = 6.0
COMFORT_ACC_MAX = 3.0
COMFORT_ACC_MIN = -5.0
DISTANCE_WANTED = 5.0 + LENGTH
TIME_WANTED = 1.5
DELTA_RANGE = (3.5, 4.5)
POLITENESS = 0.0
LANE_CHANGE_MIN_ACC_GAIN = 0.2
LANE_CHANGE_MAX_BRAKING_IMPOSED = 2.0
LANE_CHANGE_DELAY = 1.0
PERCEPTION_DISTANCE = 5.0 * MAX_SPEED

# Actions of DiscreteMetaAction.
LANE_LEFT, IDLE, LANE_RIGHT, FASTER, SLOWER = 0, 1, 2, 3, 4

# Fields of a vehicle row.
F_X, F_Y, F_HEADING, F_SPEED = 0, 1, 2, 3
F_LANE, F_TARGET_LANE, F_TARGET_SPEED = 4, 5, 6
F_DELTA, F_TIMER, F_CRASHED = 7, 8, 9
F_IMPACT, F_IMPACT_X, F_IMPACT_Y = 10, 11, 12
F_STEERING, F_ACCELERATION, F_SPEED_INDEX = 13, 14, 15
F_COS, F_SIN = 16, 17  # cos and sin of the heading, kept with it (computed once per step)
N_FIELDS = 18

_NONE = -1  # "no vehicle"


# ----------------------------------------------------------------- helpers


@njit(cache=True)
def _not_zero(x: float) -> float:
    """``utils.not_zero`` with eps 1e-2."""
    if abs(x) > 1e-2:
        return x
    if x >= 0:
        return 1e-2
    return -1e-2


@njit(cache=True)
def _wrap_to_pi(x: float) -> float:
    """``utils.wrap_to_pi`` (Python's float modulo).

    The modulo is skipped where it is the identity (``x + pi`` in [0, 2 pi), as for
    every heading on a straight road), so the result is the same to the bit.
    """
    shifted = x + np.pi
    if 0.0 <= shifted < 2 * np.pi:
        return shifted - np.pi
    return (shifted % (2 * np.pi)) - np.pi


@njit(cache=True)
def _clip(x: float, low: float, high: float) -> float:
    return min(max(x, low), high)


@njit(cache=True)
def closest_lane(x: float, y: float, heading: float) -> int:
    """``RoadNetwork.get_closest_lane_index``: argmin of ``distance_with_heading``."""
    angle = abs(_wrap_to_pi(heading - 0.0))
    best, best_distance = 0, np.inf
    for lane in range(LANES):
        lateral = y - LANE_WIDTH * lane
        distance = abs(lateral) + max(x - LANE_LENGTH, 0.0) + max(0 - x, 0.0) + 1.0 * angle
        if distance < best_distance:
            best, best_distance = lane, distance
    return best


@njit(cache=True)
def on_lane(x: float, y: float, lane: int, margin: float) -> bool:
    """``AbstractLane.on_lane`` of a straight lane."""
    lateral = y - LANE_WIDTH * lane
    return abs(lateral) <= LANE_WIDTH / 2 + margin and -LENGTH <= x < LANE_LENGTH + LENGTH


@njit(cache=True)
def _reachable(x: float, y: float, lane: int) -> bool:
    """``AbstractLane.is_reachable_from`` of a straight lane."""
    lateral = y - LANE_WIDTH * lane
    return abs(lateral) <= 2 * LANE_WIDTH and 0 <= x < LANE_LENGTH + LENGTH


# ------------------------------------------------------------------- scene


@njit(cache=True)
def reset_scene(
    vehicles: NDArray[np.float64], state: NDArray[np.uint64], buffer: NDArray[np.uint64]
) -> None:
    """Create the vehicles of a new episode as ``HighwayEnv._create_vehicles`` does.

    Parameters
    ----------
    vehicles : ndarray, shape (N_VEHICLES, N_FIELDS)
        Receives the ego (row 0) and the other vehicles, in road order.
    state, buffer : ndarray of uint64
        The env's ``np_random`` (PCG64 state and uint32 buffer), advanced.
    """
    vehicles[:] = 0.0
    for i in range(N_VEHICLES):
        lane = bounded_uint32(state, buffer, LANES)
        if i == 0:
            speed = EGO_SPEED
            offset = EGO_SPACING * (12 + 1.0 * speed) * SPACING_DECAY
            x0 = 3 * offset
        else:
            low = 0.7 * SPEED_LIMIT
            speed = low + (0.8 * SPEED_LIMIT - low) * next_double(state)
            offset = OTHERS_SPACING * (12 + 1.0 * speed) * SPACING_DECAY
            x0 = vehicles[0, F_X]
            for j in range(1, i):
                x0 = max(x0, vehicles[j, F_X])
        x0 += offset * (0.9 + (1.1 - 0.9) * next_double(state))
        row = vehicles[i]
        row[F_X] = x0
        row[F_Y] = LANE_WIDTH * lane
        row[F_HEADING] = 0.0
        row[F_COS], row[F_SIN] = np.cos(0.0), np.sin(0.0)
        row[F_SPEED] = speed
        row[F_LANE] = closest_lane(x0, row[F_Y], 0.0)
        row[F_TARGET_LANE] = row[F_LANE]
        row[F_TARGET_SPEED] = speed
        if i == 0:
            row[F_SPEED_INDEX] = 1.0
        else:
            row[F_TIMER] = ((x0 + row[F_Y]) * np.pi) % LANE_CHANGE_DELAY
            low = DELTA_RANGE[0]
            row[F_DELTA] = low + (DELTA_RANGE[1] - low) * next_double(state)


# ------------------------------------------------------- IDM and neighbours


@njit(cache=True)
def neighbours(vehicles: NDArray[np.float64], i: int, lane: int) -> tuple[int, int]:
    """``Road.neighbour_vehicles(vehicle i, lane)``: (front, rear) indices or -1."""
    s = vehicles[i, F_X]
    front, rear = _NONE, _NONE
    s_front, s_rear = 0.0, 0.0
    for j in range(N_VEHICLES):
        if j == i:
            continue
        s_v = vehicles[j, F_X]
        if not on_lane(s_v, vehicles[j, F_Y], lane, 1.0):
            continue
        if s <= s_v and (front == _NONE or s_v <= s_front):
            s_front, front = s_v, j
        if s_v < s and (rear == _NONE or s_v > s_rear):
            s_rear, rear = s_v, j
    return front, rear


@njit(cache=True)
def _velocity(row: NDArray[np.float64]) -> tuple[float, float]:
    """``RoadObject.velocity``: speed times (cos, sin) of the heading."""
    return row[F_SPEED] * row[F_COS], row[F_SPEED] * row[F_SIN]


@njit(cache=True)
def desired_gap(vehicles: NDArray[np.float64], ego: int, front: int) -> float:
    """``IDMVehicle.desired_gap`` (projected)."""
    speed, cos, sin = vehicles[ego, F_SPEED], vehicles[ego, F_COS], vehicles[ego, F_SIN]
    ex, ey = speed * cos, speed * sin
    front_speed = vehicles[front, F_SPEED]
    fx, fy = front_speed * vehicles[front, F_COS], front_speed * vehicles[front, F_SIN]
    dv = (ex - fx) * cos + (ey - fy) * sin
    ab = -COMFORT_ACC_MAX * COMFORT_ACC_MIN
    return DISTANCE_WANTED + speed * TIME_WANTED + speed * dv / (2 * np.sqrt(ab))


@njit(cache=True)
def idm_acceleration(vehicles: NDArray[np.float64], delta: float, ego: int, front: int) -> float:
    """``IDMVehicle.acceleration(ego, front)`` with the calling vehicle's exponent ``delta``."""
    if ego == _NONE:
        return 0.0
    target = _clip(vehicles[ego, F_TARGET_SPEED], 0.0, SPEED_LIMIT)
    ratio = max(vehicles[ego, F_SPEED], 0.0) / abs(_not_zero(target))
    acceleration = COMFORT_ACC_MAX * (1 - ratio**delta)
    if front != _NONE:
        d = vehicles[front, F_X] - vehicles[ego, F_X]
        gap = desired_gap(vehicles, ego, front) / _not_zero(d)
        acceleration -= COMFORT_ACC_MAX * (gap * gap)
    return acceleration


@njit(cache=True)
def _mobil(vehicles: NDArray[np.float64], i: int, lane: int) -> bool:
    """``IDMVehicle.mobil`` (no route, politeness 0)."""
    delta = vehicles[i, F_DELTA]
    new_preceding, new_following = neighbours(vehicles, i, lane)
    new_following_a = idm_acceleration(vehicles, delta, new_following, new_preceding)
    new_following_pred_a = idm_acceleration(vehicles, delta, new_following, i)
    if new_following_pred_a < -LANE_CHANGE_MAX_BRAKING_IMPOSED:
        return False
    old_preceding, old_following = neighbours(vehicles, i, int(vehicles[i, F_LANE]))
    self_pred_a = idm_acceleration(vehicles, delta, i, new_preceding)
    self_a = idm_acceleration(vehicles, delta, i, old_preceding)
    old_following_a = idm_acceleration(vehicles, delta, old_following, i)
    old_following_pred_a = idm_acceleration(vehicles, delta, old_following, old_preceding)
    jerk = (
        self_pred_a
        - self_a
        + POLITENESS
        * (new_following_pred_a - new_following_a + old_following_pred_a - old_following_a)
    )
    return not jerk < LANE_CHANGE_MIN_ACC_GAIN


@njit(cache=True)
def _change_lane_policy(vehicles: NDArray[np.float64], i: int) -> None:
    """``IDMVehicle.change_lane_policy``."""
    lane, target = int(vehicles[i, F_LANE]), int(vehicles[i, F_TARGET_LANE])
    if lane != target:
        for j in range(N_VEHICLES):
            if (
                j != i
                and int(vehicles[j, F_LANE]) != target
                and int(vehicles[j, F_TARGET_LANE]) == target
            ):
                d = vehicles[j, F_X] - vehicles[i, F_X]
                d_star = desired_gap(vehicles, i, j)
                if 0 < d < d_star:
                    vehicles[i, F_TARGET_LANE] = lane
                    break
        return
    if not LANE_CHANGE_DELAY < vehicles[i, F_TIMER]:
        return
    vehicles[i, F_TIMER] = 0.0
    for side in (lane - 1, lane + 1):
        if side < 0 or side >= LANES:
            continue
        if not _reachable(vehicles[i, F_X], vehicles[i, F_Y], side):
            continue
        if abs(vehicles[i, F_SPEED]) < 1:
            continue
        if _mobil(vehicles, i, side):
            vehicles[i, F_TARGET_LANE] = side


# ---------------------------------------------------------------- control


@njit(cache=True)
def steering_control(vehicles: NDArray[np.float64], i: int) -> float:
    """``ControlledVehicle.steering_control`` toward the target lane's centre."""
    lateral = vehicles[i, F_Y] - LANE_WIDTH * vehicles[i, F_TARGET_LANE]
    speed = vehicles[i, F_SPEED]
    if lateral == 0.0 and vehicles[i, F_HEADING] == 0.0 and speed >= 0.0:
        return 0.0  # on the lane's centre line, heading along it: every angle below is +0.0
    lateral_speed_command = -KP_LATERAL * lateral
    heading_command = np.arcsin(_clip(lateral_speed_command / _not_zero(speed), -1.0, 1.0))
    heading_ref = 0.0 + _clip(heading_command, -np.pi / 4, np.pi / 4)
    heading_rate_command = KP_HEADING * _wrap_to_pi(heading_ref - vehicles[i, F_HEADING])
    slip_angle = np.arcsin(_clip(LENGTH / 2 / _not_zero(speed) * heading_rate_command, -1.0, 1.0))
    steering = np.arctan(2 * np.tan(slip_angle))
    return _clip(steering, -MAX_STEERING_ANGLE, MAX_STEERING_ANGLE)


@njit(cache=True)
def _speed_to_index(speed: float) -> int:
    """``MDPVehicle.speed_to_index`` (NumPy's round half to even)."""
    x = (speed - TARGET_SPEEDS[0]) / (TARGET_SPEEDS[2] - TARGET_SPEEDS[0])
    return int(_clip(np.rint(x * 2), 0.0, 2.0))


@njit(cache=True)
def ego_meta_action(row: NDArray[np.float64], action: int) -> None:
    """``MDPVehicle.act(action)``'s change of target speed or lane."""
    if action == FASTER or action == SLOWER:
        step = 1 if action == FASTER else -1
        index = min(max(_speed_to_index(row[F_SPEED]) + step, 0), 2)
        row[F_SPEED_INDEX] = index
        row[F_TARGET_SPEED] = TARGET_SPEEDS[index]
    elif action == LANE_RIGHT or action == LANE_LEFT:
        step = 1 if action == LANE_RIGHT else -1
        target = min(max(int(row[F_TARGET_LANE]) + step, 0), LANES - 1)
        if _reachable(row[F_X], row[F_Y], target):
            row[F_TARGET_LANE] = target


@njit(cache=True)
def _ego_control(vehicles: NDArray[np.float64], i: int) -> None:
    """``ControlledVehicle.act()``: steering and speed control."""
    vehicles[i, F_STEERING] = steering_control(vehicles, i)
    vehicles[i, F_ACCELERATION] = KP_A * (vehicles[i, F_TARGET_SPEED] - vehicles[i, F_SPEED])


@njit(cache=True)
def _idm_act(vehicles: NDArray[np.float64], i: int) -> None:
    """``IDMVehicle.act()``."""
    if vehicles[i, F_CRASHED] != 0.0:
        return
    _change_lane_policy(vehicles, i)
    vehicles[i, F_STEERING] = steering_control(vehicles, i)
    delta = vehicles[i, F_DELTA]
    front, _ = neighbours(vehicles, i, int(vehicles[i, F_LANE]))
    acceleration = idm_acceleration(vehicles, delta, i, front)
    if vehicles[i, F_LANE] != vehicles[i, F_TARGET_LANE]:
        front, _ = neighbours(vehicles, i, int(vehicles[i, F_TARGET_LANE]))
        acceleration = min(acceleration, idm_acceleration(vehicles, delta, i, front))
    vehicles[i, F_ACCELERATION] = _clip(acceleration, -ACC_MAX, ACC_MAX)


# --------------------------------------------------------------- dynamics


@njit(cache=True)
def _vehicle_step(vehicles: NDArray[np.float64], i: int, dt: float) -> None:
    """``Vehicle.step(dt)``: clip the action, integrate the bicycle model, update the lane."""
    steering, acceleration, speed = (
        vehicles[i, F_STEERING],
        vehicles[i, F_ACCELERATION],
        vehicles[i, F_SPEED],
    )
    if vehicles[i, F_CRASHED] != 0.0:
        steering = 0.0
        acceleration = -1.0 * speed
    if speed > MAX_SPEED:
        acceleration = min(acceleration, 1.0 * (MAX_SPEED - speed))
    elif speed < MIN_SPEED:
        acceleration = max(acceleration, 1.0 * (MIN_SPEED - speed))
    vehicles[i, F_STEERING], vehicles[i, F_ACCELERATION] = steering, acceleration
    heading = vehicles[i, F_HEADING]
    # With zero steering, beta = arctan(tan(0) / 2) is a zero, heading + beta is the heading
    # (never -0.0) and its cosine and sine are the kept ones: skipped, the same to the bit.
    turning = steering != 0.0
    beta, cos_direction, sin_direction = 0.0, vehicles[i, F_COS], vehicles[i, F_SIN]
    if turning:
        beta = np.arctan(1 / 2 * np.tan(steering))
        cos_direction, sin_direction = np.cos(heading + beta), np.sin(heading + beta)
    vehicles[i, F_X] += speed * cos_direction * dt
    vehicles[i, F_Y] += speed * sin_direction * dt
    if vehicles[i, F_IMPACT] != 0.0:
        vehicles[i, F_X] += vehicles[i, F_IMPACT_X]
        vehicles[i, F_Y] += vehicles[i, F_IMPACT_Y]
        vehicles[i, F_CRASHED] = 1.0
        vehicles[i, F_IMPACT] = 0.0
    if turning:
        vehicles[i, F_HEADING] = heading + speed * np.sin(beta) / (LENGTH / 2) * dt
        vehicles[i, F_COS], vehicles[i, F_SIN] = (
            np.cos(vehicles[i, F_HEADING]),
            np.sin(vehicles[i, F_HEADING]),
        )
    vehicles[i, F_SPEED] = speed + acceleration * dt
    vehicles[i, F_LANE] = closest_lane(vehicles[i, F_X], vehicles[i, F_Y], vehicles[i, F_HEADING])


@njit(cache=True)
def _polygon(row: NDArray[np.float64], out: NDArray[np.float64]) -> None:
    """``RoadObject.polygon``: the 4 corners and the first again, shape (5, 2)."""
    c, s = row[F_COS], row[F_SIN]
    half_length, half_width = LENGTH / 2, WIDTH / 2
    corners = ((-half_length, -half_width), (-half_length, half_width))
    corners2 = ((half_length, half_width), (half_length, -half_width))
    for k in range(4):
        px, py = corners[k] if k < 2 else corners2[k - 2]
        out[k, 0] = c * px + -s * py + row[F_X]
        out[k, 1] = s * px + c * py + row[F_Y]
    out[4, 0], out[4, 1] = out[0, 0], out[0, 1]


@njit(cache=True)
def _project(polygon: NDArray[np.float64], nx: float, ny: float) -> tuple[float, float]:
    """``utils.project_polygon``."""
    low = high = polygon[0, 0] * nx + polygon[0, 1] * ny
    for k in range(1, polygon.shape[0]):
        projected = polygon[k, 0] * nx + polygon[k, 1] * ny
        low = min(low, projected)
        high = max(high, projected)
    return low, high


@njit(cache=True)
def _interval_distance(min_a: float, max_a: float, min_b: float, max_b: float) -> float:
    return min_b - max_a if min_a < min_b else min_a - max_b


@njit(cache=True)
def polygons_intersecting(
    a: NDArray[np.float64],
    b: NDArray[np.float64],
    dax: float,
    day: float,
    dbx: float,
    dby: float,
) -> tuple[bool, bool, float, float]:
    """``utils.are_polygons_intersecting``: (intersecting, will_intersect, translation)."""
    intersecting = will_intersect = True
    min_distance = np.inf
    axis_x = axis_y = 0.0
    for polygon in (a, b):
        for k in range(4):
            nx = -polygon[k + 1, 1] + polygon[k, 1]
            ny = polygon[k + 1, 0] - polygon[k, 0]
            norm = np.sqrt(nx * nx + ny * ny)
            nx, ny = nx / norm, ny / norm
            min_a, max_a = _project(a, nx, ny)
            min_b, max_b = _project(b, nx, ny)
            if _interval_distance(min_a, max_a, min_b, max_b) > 0:
                intersecting = False
            projection = nx * (dax - dbx) + ny * (day - dby)
            if projection < 0:
                min_a += projection
            else:
                max_a += projection
            distance = _interval_distance(min_a, max_a, min_b, max_b)
            if distance > 0:
                will_intersect = False
            if not intersecting and not will_intersect:
                break
            if abs(distance) < min_distance:
                min_distance = abs(distance)
                cx = (((a[0, 0] + a[1, 0]) + a[2, 0]) + a[3, 0]) / 4 - (
                    ((b[0, 0] + b[1, 0]) + b[2, 0]) + b[3, 0]
                ) / 4
                cy = (((a[0, 1] + a[1, 1]) + a[2, 1]) + a[3, 1]) / 4 - (
                    ((b[0, 1] + b[1, 1]) + b[2, 1]) + b[3, 1]
                ) / 4
                sign = 1.0 if cx * nx + cy * ny > 0 else -1.0
                axis_x, axis_y = sign * nx, sign * ny
    if will_intersect:
        return intersecting, True, min_distance * axis_x, min_distance * axis_y
    return intersecting, False, 0.0, 0.0


@njit(cache=True)
def _handle_collision(
    vehicles: NDArray[np.float64], i: int, j: int, dt: float, polygons: NDArray[np.float64]
) -> None:
    """``RoadObject.handle_collisions(other=j)`` of vehicle i past the distance test."""
    a, b = vehicles[i], vehicles[j]
    _polygon(a, polygons[0])
    _polygon(b, polygons[1])
    avx, avy = _velocity(a)
    bvx, bvy = _velocity(b)
    intersecting, will_intersect, tx, ty = polygons_intersecting(
        polygons[0], polygons[1], avx * dt, avy * dt, bvx * dt, bvy * dt
    )
    if will_intersect:
        a[F_IMPACT], a[F_IMPACT_X], a[F_IMPACT_Y] = 1.0, tx / 2, ty / 2
        b[F_IMPACT], b[F_IMPACT_X], b[F_IMPACT_Y] = 1.0, -tx / 2, -ty / 2
    if intersecting:
        a[F_CRASHED] = 1.0
        b[F_CRASHED] = 1.0


@njit(cache=True)
def simulate_step(vehicles: NDArray[np.float64], action: int) -> None:
    """``AbstractEnv._simulate(action)``: 5 frames of ``Road.act`` and ``Road.step``.

    The meta-action changes the ego's targets before the first frame's
    ``Road.act``; every vehicle then acts (the ego's controllers, the others'
    IDM and MOBIL, in road order) and steps, and every pair (i < j) is checked
    for collision.
    """
    polygons = np.empty((2, 5, 2))
    for frame in range(FRAMES):
        if frame == 0:
            ego_meta_action(vehicles[0], action)
        _ego_control(vehicles, 0)
        for i in range(1, N_VEHICLES):
            _idm_act(vehicles, i)
        for i in range(N_VEHICLES):
            if i > 0:
                vehicles[i, F_TIMER] += DT
            _vehicle_step(vehicles, i, DT)
        for i in range(N_VEHICLES):
            for j in range(i + 1, N_VEHICLES):
                # RoadObject._is_colliding's distance test, inline (a call costs refcounts)
                dx, dy = vehicles[j, F_X] - vehicles[i, F_X], vehicles[j, F_Y] - vehicles[i, F_Y]
                reach = (DIAGONAL + DIAGONAL) / 2 + vehicles[i, F_SPEED] * DT
                if not np.sqrt(dx * dx + dy * dy) > reach:
                    _handle_collision(vehicles, i, j, DT, polygons)


# ------------------------------------------------- observation and reward


@njit(cache=True)
def observe(vehicles: NDArray[np.float64], informative: bool, out: NDArray[np.float32]) -> None:
    """``KinematicObservation.observe`` then `rl.envs.highway.Highway`'s scaling.

    Parameters
    ----------
    vehicles : ndarray, shape (N_VEHICLES, N_FIELDS)
    informative : bool
        highway-env's normalisation (x / 200, y / 12, vx / 80 mapped to [-1, 1],
        clipped) when True; else the paper's (raw / 100, clipped).
    out : ndarray of float32, shape (9,)
        Receives the flattened (3, 3) observation.
    """
    ego = vehicles[0]
    ex, ey = ego[F_X], ego[F_Y]
    evx = ego[F_SPEED] * ego[F_COS]
    first, second = _NONE, _NONE
    first_d, second_d = 0.0, 0.0
    for j in range(1, N_VEHICLES):
        dx, dy = vehicles[j, F_X] - ex, vehicles[j, F_Y] - ey
        if not (np.sqrt(dx * dx + dy * dy) < PERCEPTION_DISTANCE and -2 * LENGTH < dx):
            continue
        d = abs(dx)
        if first == _NONE or d < first_d:
            second, second_d = first, first_d
            first, first_d = j, d
        elif second == _NONE or d < second_d:
            second, second_d = j, d
    raw = np.zeros((3, 3))
    raw[0, 0], raw[0, 1], raw[0, 2] = ex, ey, evx
    n_rows = 1
    for j in (first, second):
        if j != _NONE:
            row = vehicles[j]
            raw[n_rows, 0] = row[F_X] - ex
            raw[n_rows, 1] = row[F_Y] - ey
            raw[n_rows, 2] = row[F_SPEED] * row[F_COS] - evx
            n_rows += 1
    if informative:
        bounds = (5.0 * MAX_SPEED, LANE_WIDTH * LANES, 2 * MAX_SPEED)
        for r in range(n_rows):
            for f in range(3):
                low = -bounds[f]
                value = -1 + (raw[r, f] - low) * 2 / (bounds[f] - low)
                raw[r, f] = _clip(value, -1.0, 1.0)
    scale = np.float32(100.0)
    for r in range(3):
        for f in range(3):
            value = np.float32(raw[r, f])
            if not informative:
                value = min(max(value / scale, np.float32(-1.0)), np.float32(1.0))
            out[3 * r + f] = value
