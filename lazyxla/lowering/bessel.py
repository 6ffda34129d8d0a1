"""Bessel functions of integer order 0 and 1 (J, Y, K and exp-scaled K) and the Airy function Ai.

Each is a piecewise approximation in the style of the Cephes library, which is what PyTorch's CPU
kernels use: a rational function (J, Y) or a Chebyshev series (K) on a bounded range, an
asymptotic expansion (modulus and phase: sqrt(2/(pi x)) [P cos(x - phase) - Q sin(x - phase)])
for large arguments, and for Ai a convergent power series near 0. The coefficients are the
published ones; the arithmetic is done in the input's float dtype in the same order as the CPU
kernels, so float32 results round like eager's (this matters where the asymptotic phase of a large
argument is itself rounded: eager's float32 value there is determined by that rounding).

Every branch is computed for every element (jnp.where selects), so the argument fed to a branch
that is not taken is replaced by a harmless value: no log/sqrt of a negative number or division
by zero is evaluated. NaN inputs are kept on the branch that propagates them. None of these ops
has a derivative formula in PyTorch, so only the forward is lowered.

Subnormal inputs: XLA on the CPU treats them as zero (as it does for every op), so e.g. y0 and k0
of a subnormal float give -inf/inf where eager gives a finite value.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

from .pointwise import compute
from .registry import aten, register

_TWO_OVER_PI = 0.636619772367581343075535053490057448     # 2/pi
_SQRT_TWO_OVER_PI = 0.797884560802865355879892119868763737  # sqrt(2/pi)
_QUARTER_PI = 0.785398163397448309615660845819875721
_THREE_QUARTER_PI = 2.356194490192344928846982537459627163
_INV_SQRT_PI = 5.64189583547756286948e-01                   # 1/sqrt(pi)


def _horner(coefs, z):
    """sum(coefs[i] * z**(n-1-i)): highest degree first."""
    acc = jnp.full_like(z, coefs[0])
    for c in coefs[1:]:
        acc = acc * z + c
    return acc


def _clenshaw(coefs, y):
    """A Chebyshev series by Clenshaw's recurrence, as Cephes' chbevl: coefficients highest order
    first, y twice the argument mapped to [-1, 1], the constant coefficient counted half."""
    b0, b1, b2 = jnp.full_like(y, coefs[0]), jnp.zeros_like(y), jnp.zeros_like(y)
    for c in coefs[1:]:
        b2, b1 = b1, b0
        b0 = y * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _select(default, *cases):
    """The value of the first (condition, value) case that holds, else default (as a chain of
    early returns)."""
    out = default
    for cond, val in reversed(cases):
        out = jnp.where(cond, val, out)
    return out


def _c(x, v):
    return jnp.full_like(x, v)


def _divide(y, c):
    """y / c for a constant c, rounded as a division: XLA would otherwise multiply by the rounded
    reciprocal (also for a broadcast scalar divisor it cannot see), which can differ in the last
    bit, and that bit matters where the result is the phase of a large argument."""
    return y / lax.optimization_barrier(jnp.full_like(y, c))


# ---------------------------------------------------------------- J0, J1, Y0, Y1

# Asymptotic expansion for x > 5, in w = (5/x)^2: modulus factor P = PP(w)/PQ(w) and phase factor
# Q = QP(w)/QQ(w) (J0 and Y0 share them, as J1 and Y1 do).
_PP0 = (7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
        5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
        9.99999999999999997821e-01)
_PQ0 = (9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
        5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
        1.00000000000000000218e+00)
_QP0 = (-1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
        -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
        -5.14105326766599330220e+01, -6.05014350600728481186e+00)
_QQ0 = (6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
        7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
        2.42005740240291393179e+02)
_PP1 = (7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
        5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
        1.00000000000000000254e+00)
_PQ1 = (5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
        5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
        9.99999999999999997461e-01)
_QP1 = (5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
        3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
        2.11688757100572135698e+02, 2.52070205858023719784e+01)
_QQ1 = (7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
        9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
        3.36093607810698293419e+02)

# 0 <= x <= 5, in z = x^2. J0 = (z - r1^2)(z - r2^2) R(z) with r1, r2 its first two zeros.
_RP0 = (-4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14,
        9.70862251047306323952e+15)
_RQ0 = (4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07,
        1.11855537045356834862e+10, 2.11277520115489217587e+12, 3.10518229857422583814e+14,
        3.18121955943204943306e+16, 1.71086294081043136091e+18)
_J0_Z1, _J0_Z2 = 5.78318596294678452118e+00, 3.04712623436620863991e+01
# J1 = x (z - r1^2)(z - r2^2) R(z)
_RP1 = (-8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13,
        3.68295732863852883286e+15)
_RQ1 = (6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07,
        2.21511595479792499675e+10, 4.74914122079991414898e+12, 7.84369607876235854894e+14,
        8.95222336184627338078e+16, 5.32278620332680085395e+18)
_J1_Z1, _J1_Z2 = 1.46819706421238932572e+01, 4.92184563216946036703e+01
# Y0 = Y(z) + (2/pi) log(x) J0(x)
_YP0 = (1.55924367855235737965e+04, -1.46639295903971606143e+07, 5.43526477051876500413e+09,
        -9.82136065717911466409e+11, 8.75906394395366999549e+13, -3.46628303384729719441e+15,
        4.42733268572569800351e+16, -1.84950800436986690637e+16)
_YQ0 = (1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08,
        8.64002487103935000337e+10, 2.02979612750105546709e+13, 3.17157752842975028269e+15,
        2.50596256172653059228e+17)
# Y1 = x Y(z) + (2/pi) (J1(x) log(x) - 1/x)
_YP1 = (1.26320474790178026440e+09, -6.47355876379160291031e+11, 1.14509511541823727583e+14,
        -8.12770255501325109621e+15, 2.02439475713594898196e+17, -7.78877196265950026825e+17)
_YQ1 = (5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07,
        1.87601316108706159478e+10, 3.88231277496238566008e+12, 6.20557727146953693363e+14,
        6.87141087355300489866e+16, 3.97270608116560655612e+18)


def _asymptotic(x, order, second_kind):
    """J_order or Y_order for x > 5 (x: positive, inf or nan). The eager kernels form w = 25/x^2
    for order 0 and (5/x)(5/x) for order 1; kept, for the same rounding."""
    if order == 0:
        w = 25.0 / (x * x)
        pp, pq, qp, qq, shift = _PP0, _PQ0, _QP0, _QQ0, _QUARTER_PI
    else:
        w = 5.0 / x * (5.0 / x)
        pp, pq, qp, qq, shift = _PP1, _PQ1, _QP1, _QQ1, _THREE_QUARTER_PI
    p = _horner(pp, w) / _horner(pq, w)
    q = 5.0 / x * (_horner(qp, w) / _horner(qq, w))
    phase = x - shift
    if second_kind:
        v = p * jnp.sin(phase) + q * jnp.cos(phase)
    else:
        v = p * jnp.cos(phase) - q * jnp.sin(phase)
    return v * _SQRT_TWO_OVER_PI / jnp.sqrt(x)


def _j0_small(x):
    """J0 for 0 <= x <= 5."""
    z = x * x
    v = (z - _J0_Z1) * (z - _J0_Z2) * _horner(_RP0, z) / _horner(_RQ0, z)
    return jnp.where(x < 1e-5, 1.0 - z / 4.0, v)


def _j1_small(x):
    """J1 for 0 <= x <= 5."""
    z = x * x
    return _horner(_RP1, z) / _horner(_RQ1, z) * x * (z - _J1_Z1) * (z - _J1_Z2)


def _bessel_j0(x):
    a = jnp.abs(x)
    small = a <= 5.0
    return jnp.where(small, _j0_small(jnp.where(small, a, 0.0)),
                     _asymptotic(jnp.where(small, 8.0, a), 0, False))


def _bessel_j1(x):
    a = jnp.abs(x)
    small = a <= 5.0
    v = jnp.where(small, _j1_small(jnp.where(small, a, 0.0)),
                  _asymptotic(jnp.where(small, 8.0, a), 1, False))
    return jnp.where(x < 0, -v, v)


def _bessel_y0(x):
    small = x <= 5.0
    pos = small & (x > 0)
    xs = jnp.where(pos, x, 1.0)
    z = xs * xs
    v = _horner(_YP0, z) / _horner(_YQ0, z) + _TWO_OVER_PI * jnp.log(xs) * _j0_small(xs)
    return _select(_asymptotic(jnp.where(small, 8.0, x), 0, True),
                   (x == 0, _c(x, -jnp.inf)), (x < 0, _c(x, jnp.nan)), (small, v))


def _bessel_y1(x):
    small = x <= 5.0
    pos = small & (x > 0)
    xs = jnp.where(pos, x, 1.0)
    z = xs * xs
    v = xs * (_horner(_YP1, z) / _horner(_YQ1, z)) \
        + _TWO_OVER_PI * (_j1_small(xs) * jnp.log(xs) - 1.0 / xs)
    return _select(_asymptotic(jnp.where(small, 8.0, x), 1, True),
                   (x == 0, _c(x, -jnp.inf)), (x < 0, _c(x, jnp.nan)), (small, v))


# ---------------------------------------------------------------- K0, K1

# 0 < x <= 2: Chebyshev series in x^2 - 2 (for K0 + log(x/2) I0, and x K1 - x log(x/2) I1);
# x > 2: Chebyshev series in 8/x - 2 (for sqrt(x) e^x K).
_K0_A = (1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
         1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
         1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
         -5.35327393233902768720e-01)
_K0_B = (5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17,
         -1.67823109680541210385e-16, 5.51205597852431940784e-16, -1.84859337734377901440e-15,
         6.34007647740507060557e-15, -2.22751332699166985548e-14, 8.03289077536357521100e-14,
         -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
         1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10,
         -1.69753450938905987466e-09, 8.57403401741422608519e-09, -4.66048989768794782956e-08,
         2.76681363944501510342e-07, -1.83175552271911948767e-06, 1.39498137188764993662e-05,
         -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
         2.44030308206595545468e+00)
_K1_A = (-7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
         -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
         -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
         -3.53155960776544875667e-01, 1.52530022733894777053e+00)
_K1_B = (-5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17,
         1.83809354436663880070e-16, -6.05704724837331885336e-16, 2.03870316562433424052e-15,
         -7.01983709041831346144e-15, 2.47715442448130437068e-14, -8.97670518232499435011e-14,
         3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
         -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10,
         2.01504975519703286596e-09, -1.03457624656780970260e-08, 5.74108412545004946722e-08,
         -3.50196060308781257119e-07, 2.40648494783721712015e-06, -1.93619797416608296024e-05,
         1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
         2.72062619048444266945e+00)


def _bessel_k(x, order, scaled):
    small = x <= 2.0
    xs = jnp.where(small & (x > 0), x, 1.0)
    xb = jnp.where(small, 4.0, x)  # nan and inf stay on the large branch
    if order == 0:
        a = _clenshaw(_K0_A, xs * xs - 2.0)
        v = a - jnp.log(0.5 * xs) * (lax.bessel_i0e(xs) * jnp.exp(xs))
        b = _clenshaw(_K0_B, 8.0 / xb - 2.0)
    else:
        a = _clenshaw(_K1_A, xs * xs - 2.0)
        v = jnp.log(0.5 * xs) * (lax.bessel_i1e(xs) * jnp.exp(xs)) + a / xs
        b = _clenshaw(_K1_B, 8.0 / xb - 2.0)
    if scaled:
        v = v * jnp.exp(xs)
        w = b / jnp.sqrt(xb)
    else:
        w = jnp.exp(-xb) * b / jnp.sqrt(xb)
    return _select(w, (x == 0, _c(x, jnp.inf)), (x < 0, _c(x, jnp.nan)), (small, v))


# ---------------------------------------------------------------- Ai

# x >= 2.09: Ai = e^-zeta / (2 sqrt(pi) x^(1/4)) AN(1/zeta)/AD(1/zeta), zeta = (2/3) x^(3/2)
_AI_AN = (3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
          1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
          1.40264691163389668864e+01, 9.99999999999999995305e-01)
_AI_AD = (5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
          1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
          1.40959135607834029598e+01, 1.00000000000000000470e+00)
# x < -2.09: Ai = (sin(t) (1 + z^2 F(z^2)) - cos(t) z G(z^2)) / (sqrt(pi) (-x)^(1/4)),
# z = 1/zeta, t = zeta + pi/4. Eager sums the denominators AFD, AGD without the implicit leading
# 1 of Cephes' monic form; so does this, to agree with it.
_AI_AFN = (-1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
           -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
           -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08)
_AI_AFD = (1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
           9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
           4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07)
_AI_AGN = (1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
           9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
           5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
           8.11789239554389293311e-08, 3.41551784765923618484e-10)
_AI_AGD = (9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
           5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
           4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
           4.91834570062930015649e-09)
# |x| < 2.09: Ai = c1 f(x) - c2 g(x) with c1 = Ai(0), c2 = -Ai'(0) and the Maclaurin series
# f = sum 3^k (1/3)_k x^3k / (3k)!, g = sum 3^k (2/3)_k x^(3k+1) / (3k+1)!
_AI_C1, _AI_C2 = 0.355028053887817239260, 0.258819403792806798405
_AI_TERMS = 16  # |x^3| < 9.2: the 16th term is below 1e-25 of the sum


def _airy_ai(x):
    neg = x < -2.09
    pos = x >= 2.09
    # large negative x
    xn = jnp.where(neg, x, -4.0)
    zeta_n = _divide(-2.0 * xn * jnp.sqrt(-xn), 3.0)
    z = 1.0 / zeta_n
    zz = z * z
    f = 1.0 + zz * _horner(_AI_AFN, zz) / _horner(_AI_AFD, zz)
    g = z * _horner(_AI_AGN, zz) / _horner(_AI_AGD, zz)
    t = zeta_n + 0.25 * math.pi
    v_neg = _INV_SQRT_PI / jnp.sqrt(jnp.sqrt(-xn)) * (jnp.sin(t) * f - jnp.cos(t) * g)
    # large positive x (exp overflows to inf for the largest: Ai is then 0)
    xp = jnp.where(pos, x, 4.0)
    zeta_p = _divide(2.0 * xp * jnp.sqrt(xp), 3.0)
    r = 1.0 / zeta_p
    v_pos = _INV_SQRT_PI * (_horner(_AI_AN, r) / _horner(_AI_AD, r)) \
        / (2.0 * jnp.sqrt(jnp.sqrt(xp)) * jnp.exp(zeta_p))
    # power series
    xm = jnp.where(neg | pos, 0.0, x)
    cube = xm * xm * xm
    m, n = jnp.ones_like(xm), xm
    fs, gs = m, n
    k = 1.0
    for _ in range(_AI_TERMS):
        m = m * cube / (k + 1.0)
        n = n * cube / (k + 2.0)
        m = m / (k + 2.0)
        fs = fs + m
        n = n / (k + 3.0)
        gs = gs + n
        k += 3.0
    v_mid = _AI_C1 * fs - _AI_C2 * gs
    return _select(v_mid,
                   (jnp.isinf(x), _c(x, jnp.nan)), (x > 103.892, _c(x, 0.0)),
                   (neg, v_neg), (pos, v_pos))


# ---------------------------------------------------------------- registration

def _unary(op, fn):
    def low(x, _meta):
        return fn(compute(_meta, x))
    low.__name__ = fn.__name__.lstrip("_")
    register(op, meta=True)(low)


for _op, _fn in {
    aten.special_bessel_j0.default: _bessel_j0,
    aten.special_bessel_j1.default: _bessel_j1,
    aten.special_bessel_y0.default: _bessel_y0,
    aten.special_bessel_y1.default: _bessel_y1,
    aten.special_modified_bessel_k0.default: lambda x: _bessel_k(x, 0, False),
    aten.special_modified_bessel_k1.default: lambda x: _bessel_k(x, 1, False),
    aten.special_scaled_modified_bessel_k0.default: lambda x: _bessel_k(x, 0, True),
    aten.special_scaled_modified_bessel_k1.default: lambda x: _bessel_k(x, 1, True),
    aten.special_airy_ai.default: _airy_ai,
}.items():
    _unary(_op, _fn)
